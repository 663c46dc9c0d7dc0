// The machine a target's database runs on, as the target describes it (Target.machine) and the
// knob catalog bounds parameters by it.

export interface Machine {
  /** Total RAM of the database host (instance class memory on a managed service). */
  readonly memoryBytes: number;
  readonly vcpus: number;
  /**
   * Kind of storage, when known. Only `effective_io_concurrency` depends on it: a spinning disk
   * gains nothing from deep prefetch queues. Unknown means SSD or network block storage, which
   * is what every managed target provides.
   */
  readonly storage?: 'ssd' | 'hdd';
  /** Size of the data volume, when known: `max_wal_size` stays a small share of it. */
  readonly storageBytes?: number;
}
