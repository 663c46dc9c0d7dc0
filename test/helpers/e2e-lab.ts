// The end-to-end tests' lab: a throwaway cluster with the lab workloads' tables, the service on
// PGlite with its admin, one database whose real tuner-agent (--local) reports every few seconds,
// and a close() that stops the agent and removes the rest. The load is each test's own.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Cluster } from '../../src/lab/cluster.ts';
import { startLoad, type RunningLoad, type Workload } from '../../src/lab/workloads.ts';
import { until } from './until.ts';
import { startAgentCluster, writeLocalAgentConfig } from './agent-cluster.ts';
import { startAgent, type AgentProcess } from './agent-process.ts';
import type { PersonClient } from './service.ts';
import { startAdminService, type AdminService, type AdminServiceOptions } from './service-admin.ts';

export interface E2eLab {
  cluster: Cluster;
  lab: AdminService;
  person: PersonClient;
  databaseId: string;
  agent: AgentProcess;
  /** The agent's folder (agent.yaml), and the load's scripts. */
  dir: string;
  /** Runs `workload` with `clients` (stopping the load before) and waits for a report that has it
   * in it (within `withinMs`, 60 s by default: longer than the agent's report interval). */
  runLoad(workload: Workload, clients?: number, withinMs?: number): Promise<void>;
  stopLoad(): Promise<void>;
  /** Sets how often the agent reports (it learns it from its next report's answer). */
  setReportInterval(seconds: number): Promise<void>;
  close(): Promise<void>;
}

export interface E2eLabOptions {
  /** Whose tables the cluster gets (their setup runs once). */
  workloads: readonly Workload[];
  /** How often the agent reports (1 s by default); null leaves the service's default (60 s). */
  reportIntervalSeconds?: number | null;
  /** The agent sends the statements' texts. */
  includeQueries?: boolean;
  /** The agent asks the planner (postgresql.include_plans), agent_user granted pg_read_all_data. */
  includePlans?: boolean;
  start?: AdminServiceOptions['start'];
}

export async function startE2eLab(name: string, options: E2eLabOptions): Promise<E2eLab> {
  const cluster = await startAgentCluster();
  const cleanups: Array<() => Promise<void> | void> = [() => cluster.destroy()];
  const close = async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  };
  try {
    for (const workload of options.workloads) await workload.setup(cluster);
    const lab = await startAdminService('pglite', options.start ? { start: options.start } : {});
    cleanups.push(() => lab.close());
    const person = lab.admin;
    const created = await person.createDatabase(name, 'local');
    const setReportInterval = async (seconds: number) => {
      const answer = await person.post(`/api/manage/databases/${created.databaseId}/report-interval`, { reportIntervalSeconds: seconds });
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
    };
    if (options.reportIntervalSeconds !== null) await setReportInterval(options.reportIntervalSeconds ?? 1);
    const dir = mkdtempSync(join(tmpdir(), `tuner-${name}-`));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    writeLocalAgentConfig(dir, {
      cluster,
      serverUrl: lab.service.url,
      apiKey: created.apiKey,
      databaseId: created.databaseId,
      ...(options.includeQueries && { includeQueries: true }),
      ...(options.includePlans && { includePlans: true }),
    });
    if (options.includePlans) await cluster.sql('GRANT pg_read_all_data TO agent_user');
    const agent = startAgent(['--local'], { cwd: dir });
    cleanups.push(async () => {
      agent.child.kill('SIGTERM');
      await Promise.race([agent.exited, sleep(15_000)]);
    });
    let load: RunningLoad | undefined;
    cleanups.push(() => load?.stop());
    const runLoad = async (workload: Workload, clients = 2, withinMs = 60_000) => {
      await load?.stop();
      load = await startLoad(cluster, workload, { dir, clients });
      const since = Date.now();
      await until(
        `a report with the ${workload.name} workload in it`,
        async () => {
          const answer = await person.get<{ report: { receivedAt: string; metrics: { derived: { calls: number } } | null } | null }>(
            `/api/manage/databases/${created.databaseId}/reports/latest`,
          );
          const latest = answer.body.report;
          return latest?.metrics && Date.parse(latest.receivedAt) > since + 1500 && latest.metrics.derived.calls > 0;
        },
        withinMs,
      );
    };
    const stopLoad = async () => {
      await load?.stop();
      load = undefined;
    };
    return { cluster, lab, person, databaseId: created.databaseId, agent, dir, runLoad, stopLoad, setReportInterval, close };
  } catch (err) {
    await close();
    throw err;
  }
}
