// pgtune's published formulas (pgtune.leopard.in.ua and its documentation), written from the
// formulas themselves: the expert heuristic the optimizer starts from, and an independent
// baseline for the benchmark. Inputs are the machine and the workload type; outputs are the
// catalog knobs pgtune sets, as numbers in their pg_settings units.
import { GiB, KiB, MiB, PAGE_BYTES } from '../knobs/index.ts';

const KB_PER_PAGE = PAGE_BYTES / KiB;

export type PgtuneWorkload = 'web' | 'oltp' | 'dw' | 'desktop' | 'mixed';
export type PgtuneStorage = 'ssd' | 'hdd' | 'san';

export interface PgtuneInput {
  readonly memoryBytes: number;
  readonly vcpus: number;
  /** Default mixed: pgtune's general-purpose profile, when nothing is known of the workload. */
  readonly workload?: PgtuneWorkload;
  /** Default ssd. */
  readonly storage?: PgtuneStorage;
  /** The server's max_connections; pgtune's default for the workload when not given. */
  readonly maxConnections?: number;
}

/** The values pgtune recommends, in pg_settings units (8kB pages, kB, MB). */
export interface PgtuneSettings {
  readonly shared_buffers: number;
  readonly effective_cache_size: number;
  readonly maintenance_work_mem: number;
  readonly checkpoint_completion_target: number;
  readonly wal_buffers: number;
  readonly default_statistics_target: number;
  readonly random_page_cost: number;
  readonly effective_io_concurrency: number;
  readonly work_mem: number;
  readonly min_wal_size: number;
  readonly max_wal_size: number;
  /** Parallel settings: pgtune sets them only from 4 vCPUs. */
  readonly max_worker_processes?: number;
  readonly max_parallel_workers_per_gather?: number;
  readonly max_parallel_workers?: number;
  readonly max_parallel_maintenance_workers?: number;
}

/** pgtune's max_connections for each workload, used when the server's is not known. */
export const PGTUNE_CONNECTIONS: Readonly<Record<PgtuneWorkload, number>> = { web: 200, oltp: 300, dw: 40, desktop: 20, mixed: 100 };

// min_wal_size / max_wal_size per workload, in MB.
const WAL_SIZES: Readonly<Record<PgtuneWorkload, readonly [number, number]>> = {
  web: [1024, 4096],
  oltp: [2048, 8192],
  dw: [4096, 16384],
  desktop: [100, 2048],
  mixed: [1024, 4096],
};

// work_mem is divided by this on top of the base formula: analytics and desktops run fewer,
// bigger queries with other memory users around.
const WORK_MEM_DIVISOR: Readonly<Record<PgtuneWorkload, number>> = { web: 1, oltp: 1, dw: 2, desktop: 6, mixed: 2 };

export function pgtune(input: PgtuneInput): PgtuneSettings {
  const workload = input.workload ?? 'mixed';
  const storage = input.storage ?? 'ssd';
  const ramKb = Math.floor(input.memoryBytes / KiB);
  const connections = input.maxConnections ?? PGTUNE_CONNECTIONS[workload];

  // shared_buffers: a quarter of RAM (a sixteenth on a desktop).
  const sharedBuffersKb = Math.floor(workload === 'desktop' ? ramKb / 16 : ramKb / 4);
  // effective_cache_size: three quarters of RAM (a quarter on a desktop).
  const cacheKb = Math.floor(workload === 'desktop' ? ramKb / 4 : (ramKb * 3) / 4);
  // maintenance_work_mem: a sixteenth of RAM (an eighth for analytics), at most 2 GB.
  const maintenanceKb = Math.min(Math.floor(workload === 'dw' ? ramKb / 8 : ramKb / 16), (2 * GiB) / KiB);

  // wal_buffers: 3 % of shared_buffers, from 32 kB to one 16 MB WAL segment; close to 16 MB
  // (above 14 MB) means a whole segment.
  let walBuffersKb = Math.floor((3 * sharedBuffersKb) / 100);
  if (walBuffersKb > (14 * MiB) / KiB) walBuffersKb = (16 * MiB) / KiB;
  walBuffersKb = Math.max(walBuffersKb, 32);

  // Parallelism: from 4 vCPUs, half of them per query node (at most 4 outside analytics) and
  // all of them for the server.
  const parallel = input.vcpus >= 4;
  const perGather = Math.ceil(input.vcpus / 2);
  const workersPerGather = workload === 'dw' ? perGather : Math.min(perGather, 4);
  const maintenanceWorkers = Math.min(perGather, 4);

  // work_mem: what shared_buffers leaves, over three sorts per connection, shared by the
  // workers of a parallel query; never below 64 kB.
  const parallelShare = parallel ? workersPerGather : 1;
  const workMemKb = Math.max(64, Math.floor((ramKb - sharedBuffersKb) / (connections * 3) / parallelShare / WORK_MEM_DIVISOR[workload]));

  const [minWal, maxWal] = WAL_SIZES[workload];
  return {
    shared_buffers: Math.floor(sharedBuffersKb / KB_PER_PAGE),
    effective_cache_size: Math.floor(cacheKb / KB_PER_PAGE),
    maintenance_work_mem: maintenanceKb,
    checkpoint_completion_target: 0.9,
    wal_buffers: Math.floor(walBuffersKb / KB_PER_PAGE),
    default_statistics_target: workload === 'dw' ? 500 : 100,
    random_page_cost: storage === 'hdd' ? 4 : 1.1,
    effective_io_concurrency: storage === 'hdd' ? 2 : storage === 'san' ? 300 : 200,
    work_mem: workMemKb,
    min_wal_size: minWal,
    max_wal_size: maxWal,
    ...(parallel
      ? {
          max_worker_processes: input.vcpus,
          max_parallel_workers_per_gather: workersPerGather,
          max_parallel_workers: input.vcpus,
          max_parallel_maintenance_workers: maintenanceWorkers,
        }
      : {}),
  };
}
