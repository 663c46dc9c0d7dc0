// One line of the preflight (tuner-agent --check), whoever checks it: a target, the outbound
// routes, the database's grants.
export interface PreflightCheck {
  name: string;
  ok: boolean;
  /** What was found. */
  detail: string;
  /** What to do when it failed, in the words of the setup steps. */
  fix?: string;
  /** A warning does not fail the preflight. */
  severity?: 'error' | 'warning';
  /** The check could not run at all (the database went away mid-way, an unexpected error): a
   * FAIL for --check, but a run does not block tuning on it, since nothing was found missing. */
  unchecked?: boolean;
}
