// CPU time of processes from Linux /proc, for the benchmarks: a process's own, and that of the
// PostgreSQL backends serving one database (their process title names it), so that a figure per
// request or report holds whatever else loads the machine.
import { readFileSync, readdirSync } from 'node:fs';

const TICKS_PER_SECOND = 100;

/** utime + stime of a process, in seconds (Linux /proc). */
export function cpuSeconds(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

/** The PostgreSQL backends serving one database: their process title names it. */
export function backendsOf(databaseName: string | undefined): number[] {
  if (!databaseName) return [];
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(` ${databaseName} `)) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}
