// A light timer for the service's background rounds (the tuning sessions' ticker, the watch):
// a round that is slower than the interval is not stacked upon, and stopping waits for the
// round in progress.

export interface Repeating {
  /** Stops the timer and waits for a round in progress. */
  stop(): Promise<void>;
}

/** Runs `round` every `everyMs` (and at once, with `atOnce`). `round` handles its own errors. */
export function repeatEvery(round: () => Promise<void>, everyMs: number, options: { atOnce?: boolean } = {}): Repeating {
  let inFlight: Promise<void> | null = null;
  const start = () => {
    if (inFlight) return;
    inFlight = round().finally(() => {
      inFlight = null;
    });
  };
  const timer = setInterval(start, everyMs);
  timer.unref();
  if (options.atOnce) start();
  return {
    async stop() {
      clearInterval(timer);
      await inFlight;
    },
  };
}
