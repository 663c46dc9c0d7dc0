// The local target: a self-hosted PostgreSQL the agent can reach with a role allowed to run
// ALTER SYSTEM (a superuser, or on PostgreSQL 15+ a role with `ALTER SYSTEM ON PARAMETER`
// grants, see permissions.ts). The override layer is postgresql.auto.conf (write.ts).
import { describeConnection } from '../../../postgres/connect.ts';
import type { Target, TargetDeps } from '../../../target/target.ts';
import { isSameHost, localMachine } from './machine.ts';
import { hostMemoryMetrics } from './metrics.ts';
import { localPreflight } from './preflight.ts';
import { readAutoConf, writeAutoConf } from './write.ts';
import { localConfig } from './config.ts';

export function createLocalTarget({ db, config }: Pick<TargetDeps, 'db' | 'config'>): Target {
  const where = describeConnection(config.postgresql.connectionUrl);
  const machine = () => localMachine(localConfig.of(config), where.host);
  return {
    kind: 'local',
    identity: `local ${where.host}:${where.port}/${where.database}`,
    machine,
    applyBlockedReason: () => Promise.resolve(null),
    metrics: () => Promise.resolve(isSameHost(where.host) ? hostMemoryMetrics() : []),
    readOverrides: (names) => readAutoConf(db, names),
    writeOverrides: (overrides, options) => writeAutoConf({ db, config }, overrides, options),
    /** ALTER SYSTEM writes every catalog knob; the catalog's own checks refuse the rest. */
    unwritable: () => Promise.resolve(new Map<string, string>()),
    preflight: () => localPreflight({ db, config, user: where.user, machine }),
    close: () => Promise.resolve(),
  };
}
