// tuner-agent's command line: parse, load the configuration, connect, and run one command.
// Exit codes are part of the interface (docs/cli.md): scripts and supervisors rely on them.
import { existsSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { parseArgs } from 'node:util';
import type { TargetKind } from '../../knobs/index.ts';
import { REPORT_INTERVAL_SECONDS } from '../../protocol/v1.ts';
import { applyChange, recoverOnStart, restore, tuningMode, type ApplyContext, type ApplyOutcome } from '../applying/apply.ts';
import { ConfigError, loadConfig, type AgentConfig } from '../config/load.ts';
import { locateConfig, missingNamedFile } from '../config/location.ts';
import { connectDb, type Db } from '../database/db.ts';
import { agentConnectionContext } from './db-tls.ts';
import { InitError, initInstance } from './init.ts';
import { Journal, JournalError } from '../applying/journal.ts';
import { redact } from '../base/redact.ts';
import { createLogger, errorMessage, type Logger } from '../base/log.ts';
import { runLoop } from './loop.ts';
import { configureOutbound, OutboundError, routeChecks, type Outbound, type Peer } from '../sending/outbound.ts';
import { connectionChecks, formatChecks, preflightPassed, runPreflight, serviceChecks } from './preflight.ts';
import { ServiceRejectedError, createServiceClient } from '../sending/service-client.ts';
import { collectOnce } from './once.ts';
import { planChecks } from '../plans/preflight.ts';
import { probePlans } from '../plans/probe.ts';
import { ConnectionSettingError, PostgresConnectError, describeSecurity } from '../../postgres/connect.ts';
import { describeConnection } from '../../postgres/connect.ts';
// The targets' definitions import their SDKs only when a target is made (registry.ts).
import { TARGETS, type TargetRegistry } from '../targets/registry.ts';
import type { PreflightCheck, Target } from '../../target/target.ts';
import type { AgentMetricsServer } from './metrics.ts';
import { AGENT_VERSION } from '../base/version.ts';

export const EXIT = {
  ok: 0,
  /** A runtime failure: database unreachable, a change that failed and was put back. */
  failure: 1,
  /** Wrong command line or configuration. */
  usage: 2,
  /** --check found a failed prerequisite. */
  preflightFailed: 3,
  /** The agent's own checks refused a change; nothing was changed. */
  refused: 4,
  /** The tuning service rejected the API key or the database id. */
  rejected: 5,
  /** Another agent already reports for this database. */
  conflict: 6,
} as const;

/** "--a, --b or --c". */
function flagList(kinds: readonly string[], last = 'or'): string {
  const flags = kinds.map((k) => `--${k}`);
  return flags.length <= 1 ? flags.join('') : `${flags.slice(0, -1).join(', ')} ${last} ${flags.at(-1)!}`;
}

export function helpText(registry: TargetRegistry): string {
  const targets = registry.kinds.map((kind) => `  ${`--${kind}`.padEnd(22)}${registry.infoOf(kind).help}`).join('\n');
  return `tuner-agent ${AGENT_VERSION}: tunes one PostgreSQL database, reporting to the tuning service

Usage:
  tuner-agent <target> [command] [options]
  tuner-agent permissions <target> [--extended]
                                  print the target's permission document alone on stdout (JSON
                                  or SQL), its notes on stderr; --extended: Cloud A's optional
                                  actions too
  tuner-agent init DIR <target>   make DIR for one more instance: a copy of this binary and an
                                  agent.yaml to fill in (one directory per database)
  tuner-agent plans <target> [--set NAME=VALUE]...
                                  print as JSON the generic plans of the statements carrying the
                                  time, under the current settings and, with --set, under those
                                  values, each marked changed or not; plans only, runs nothing,
                                  changes nothing (docs/plans.md)

Targets (exactly one):
${targets}

Commands (default: run and report to the tuning service):
  --check               check every prerequisite (the database, the cloud, the tuning service),
                        print each as PASS, WARN or FAIL with its fix
  --once                collect one report over --interval seconds and print it as JSON
  --apply NAME=VALUE    apply a change through all of the agent's checks (repeatable)
  --revert              return every parameter the agent changed to the value it found

Options:
  --interval SECONDS    --once: seconds between the two snapshots (default 5)
  --set NAME=VALUE      plans: a value to plan under, SET LOCAL in a rolled-back transaction
                        (repeatable; session-settable parameters only)
  --config PATH         read PATH (else the file AGENT_CONFIG names, else ./agent.yaml,
                        else /etc/tuner-agent/agent.yaml)
  --metrics-listen HOST:PORT
                        while running, serve Prometheus metrics at http://HOST:PORT/metrics
  --version             print the version
  --help                print this help

Configuration: agent.yaml and AGENT_* environment variables, which win (docs/configuration.md).
Exit codes: 0 ok, 1 runtime failure, 2 usage or configuration error, 3 preflight failed,
            4 change refused by the agent's checks (nothing changed), 5 API key or database id
            rejected by the tuning service, 6 another agent already reports for this database.
`;
}

export const HELP = helpText(TARGETS);

export interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
}

const defaultIo: Io = { out: (t) => process.stdout.write(t), err: (t) => process.stderr.write(t) };

class UsageError extends Error {}

interface Invocation {
  target: TargetKind | null;
  command: 'run' | 'check' | 'once' | 'apply' | 'revert' | 'permissions' | 'init' | 'plans' | 'help' | 'version';
  apply: Record<string, string>;
  /** plans --set: the values to plan under. */
  set: Record<string, string>;
  intervalSeconds: number;
  configPath: string | undefined;
  /** init: the directory to make. */
  initDir: string | undefined;
  /** --metrics-listen HOST:PORT (wins over tuner.metrics_listen). */
  metricsListen: string | undefined;
  /** permissions --extended: Cloud A's optional actions too. */
  extended: boolean;
}

export function parseInvocation(argv: string[], registry: TargetRegistry = TARGETS): Invocation {
  const targetFlags = Object.fromEntries(registry.kinds.map((kind) => [kind, { type: 'boolean' } as const]));
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        ...targetFlags,
        check: { type: 'boolean' },
        once: { type: 'boolean' },
        apply: { type: 'string', multiple: true },
        set: { type: 'string', multiple: true },
        revert: { type: 'boolean' },
        interval: { type: 'string' },
        config: { type: 'string' },
        'metrics-listen': { type: 'string' },
        extended: { type: 'boolean' },
        version: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    throw new UsageError(`${(err as Error).message}; see tuner-agent --help`);
  }
  const { values, positionals } = parsed;
  const flags: Record<string, unknown> = values;
  const targets = registry.kinds.filter((kind) => flags[kind] === true);
  if (targets.length > 1) throw new UsageError(`choose one target, not ${targets.map((t) => `--${t}`).join(' and ')}`);
  const target = targets[0] ?? null;

  const commands = [
    values.check && 'check',
    values.once && 'once',
    values.apply && 'apply',
    values.revert && 'revert',
    positionals[0] === 'permissions' && 'permissions',
    positionals[0] === 'init' && 'init',
    positionals[0] === 'plans' && 'plans',
  ].filter((c): c is Invocation['command'] => typeof c === 'string');
  if (positionals.length > 0 && !['permissions', 'init', 'plans'].includes(positionals[0]!))
    throw new UsageError(`unknown command "${positionals[0]}"; see tuner-agent --help`);
  const arity = positionals[0] === 'init' ? 2 : 1;
  if (positionals.length > arity) throw new UsageError(`unexpected argument "${positionals[arity]}"; see tuner-agent --help`);
  if (positionals[0] === 'init' && positionals[1] === undefined)
    throw new UsageError('init needs a directory: tuner-agent init DIR --local (or another target)');
  if (commands.length > 1) throw new UsageError(`choose one command, not ${commands.join(' and ')}`);
  const extendable = registry.kinds.filter((kind) => registry.definitionOf(kind).extendedPermissions);
  if (values.extended && (positionals[0] !== 'permissions' || target === null || !extendable.includes(target)))
    throw new UsageError(`--extended goes with permissions ${flagList(extendable)} only; see tuner-agent --help`);
  if (values.set && positionals[0] !== 'plans') throw new UsageError('--set goes with plans only; see tuner-agent --help');
  const command = values.help ? 'help' : values.version ? 'version' : (commands[0] ?? 'run');

  const assignments = (flag: string, items: readonly string[] = []): Record<string, string> => {
    const out: Record<string, string> = {};
    for (const item of items) {
      const m = /^([a-z_][a-z0-9_.]*)=(.+)$/i.exec(item.trim());
      if (!m) throw new UsageError(`--${flag} ${item}: expected NAME=VALUE, e.g. --${flag} work_mem=64MB`);
      out[m[1]!] = m[2]!;
    }
    return out;
  };
  const apply = assignments('apply', values.apply);
  const set = assignments('set', values.set);
  let intervalSeconds = 5;
  if (values.interval !== undefined) {
    intervalSeconds = Number(values.interval);
    const { min, max } = REPORT_INTERVAL_SECONDS;
    if (!Number.isFinite(intervalSeconds) || intervalSeconds < min || intervalSeconds > max) {
      throw new UsageError(`--interval ${values.interval}: expected a number of seconds from ${min} to ${max}`);
    }
  }
  if (command !== 'help' && command !== 'version' && target === null) {
    throw new UsageError(`choose a target: ${flagList(registry.kinds)}; see tuner-agent --help`);
  }
  return {
    target,
    command,
    apply,
    set,
    intervalSeconds,
    configPath: values.config,
    initDir: positionals[0] === 'init' ? positionals[1] : undefined,
    metricsListen: values['metrics-listen'],
    extended: values.extended ?? false,
  };
}

/** Whom the agent talks to besides the database, for the preflight's route lines. */
function peersOf(registry: TargetRegistry, kind: TargetKind, config: AgentConfig, env: Record<string, string | undefined>): Peer[] {
  const peers: Peer[] = [];
  if (config.tuner.serverUrl) peers.push({ name: 'the tuning service', url: config.tuner.serverUrl });
  return [...peers, ...registry.definitionOf(kind).peers(kind, config, env)];
}

/**
 * `permissions --<kind>`: the target's document alone on stdout, so that `> file` is that file
 * (JSON that parses, or SQL that psql runs), and its notes on stderr, after it: in a terminal they
 * follow the document they speak of. A cloud's document may use the configuration when there is
 * one (placeholders without).
 */
async function printPermissions(
  io: Io,
  registry: TargetRegistry,
  invocation: Invocation,
  env: NodeJS.ProcessEnv,
  cwd: string,
): Promise<void> {
  const kind = invocation.target!;
  // A file named on purpose that is not there is said, as by every other command, rather than
  // a document with placeholders where the operator expected the file's values.
  const location = locateConfig({ cwd, env, flag: invocation.configPath });
  if (location.origin !== 'search' && !existsSync(location.file!)) throw new Error(missingNamedFile(location));
  const config = (): AgentConfig | null => {
    try {
      const file = invocation.configPath;
      return loadConfig({ cwd, env, target: kind, needsService: false, registry, ...(file && { file }) }).config;
    } catch {
      return null;
    }
  };
  const notes: string[] = [];
  const document = await registry
    .definitionOf(kind)
    .permissions({ kind, extended: invocation.extended, note: (text) => notes.push(text), config });
  io.out(document);
  for (const text of notes) io.err(text);
}

function printOutcome(io: Io, outcome: ApplyOutcome, done = 'applied'): number {
  if (outcome.status === 'applied') {
    const values = Object.entries(outcome.effective)
      .map(([n, v]) => `${n} = ${v}`)
      .join(', ');
    io.out(`${done} and read back from pg_settings${outcome.restarted ? ' (after a restart)' : ''}: ${values}\n`);
    return EXIT.ok;
  }
  const lines = outcome.errors.map((e) => `  ${e}`).join('\n');
  if (outcome.status === 'refused') {
    io.err(`refused, nothing was changed:\n${lines}\n`);
    return EXIT.refused;
  }
  io.err(
    `failed: ${outcome.restored ? 'the previous values were put back' : 'the previous values could not all be put back; the next start retries'}:\n${lines}\n`,
  );
  return EXIT.failure;
}

export async function main(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
  cwd = process.cwd(),
  printer: Io = defaultIo,
  registry: TargetRegistry = TARGETS,
): Promise<number> {
  // Everything the agent prints passes through the one masking function, whatever made it.
  const io: Io = { out: (text) => printer.out(redact(text)), err: (text) => printer.err(redact(text)) };
  let invocation: Invocation;
  try {
    invocation = parseInvocation(argv, registry);
  } catch (err) {
    io.err(`tuner-agent: ${(err as Error).message}\n`);
    return EXIT.usage;
  }
  if (invocation.command === 'help') {
    io.out(HELP);
    return EXIT.ok;
  }
  if (invocation.command === 'version') {
    io.out(`tuner-agent ${AGENT_VERSION}\n`);
    return EXIT.ok;
  }
  const kind = invocation.target!;
  if (invocation.command === 'init') {
    try {
      io.out(initInstance(invocation.initDir!, kind, cwd).text);
      return EXIT.ok;
    } catch (err) {
      io.err(`tuner-agent: ${err instanceof InitError ? err.message : errorMessage(err)}\n`);
      return err instanceof InitError ? EXIT.usage : EXIT.failure;
    }
  }
  if (invocation.command === 'permissions') {
    try {
      await printPermissions(io, registry, invocation, env, cwd);
      return EXIT.ok;
    } catch (err) {
      io.err(`tuner-agent: ${errorMessage(err)}\n`);
      return EXIT.usage;
    }
  }

  let config: AgentConfig;
  let configSource: string;
  let log: Logger;
  try {
    const loaded = loadConfig({
      cwd,
      env,
      target: kind,
      needsService: invocation.command === 'run',
      registry,
      ...(invocation.configPath && { file: invocation.configPath }),
    });
    config = loaded.config;
    configSource = loaded.source;
    log = createLogger({ debug: config.tuner.debug, write: io.err });
    for (const w of loaded.warnings) log.warn(w);
    log.debug(`configuration from ${loaded.source}`);
  } catch (err) {
    if (err instanceof ConfigError) {
      for (const p of err.problems) io.err(`tuner-agent: ${p}\n`);
      return EXIT.usage;
    }
    io.err(`tuner-agent: reading the configuration failed: ${errorMessage(err)}\n`);
    return EXIT.failure;
  }

  let outbound: Outbound;
  try {
    outbound = configureOutbound(config.tuner);
  } catch (err) {
    if (!(err instanceof OutboundError)) throw err;
    io.err(`tuner-agent: ${err.message}\n`);
    return EXIT.usage;
  }

  const restart = registry.capabilitiesOf(kind).restart;
  if (restart.mode === 'never' && config.postgresql.allowRestart) {
    io.err(`tuner-agent: ${restart.refusal}\n`);
    return EXIT.usage;
  }

  // --check asks the tuning service too, when it is configured: the key and database id accepted.
  const { serverUrl, apiKey, databaseId } = config.tuner;
  const checkService = () =>
    serviceChecks(
      config.tuner,
      kind,
      serverUrl && apiKey && databaseId ? createServiceClient({ serverUrl, apiKey, databaseId, dispatcher: outbound.dispatcher }) : null,
    );
  // --check says which file it read: with a search path, the answer is not always obvious.
  const checkHeading = (identity: string) =>
    `tuner-agent --${kind} --check: ${identity} (${tuningMode(config)})\nconfiguration: ${configSource}`;

  let db: Db;
  try {
    db = await connectDb(config.postgresql.connectionUrl, {
      connection: await agentConnectionContext(kind, config.postgresql.extraCaFile, registry),
    });
  } catch (err) {
    if (err instanceof ConnectionSettingError) {
      log.error(err.message);
      return EXIT.usage;
    }
    if (invocation.command === 'check') {
      // Every prerequisite still gets its line: the database's failure does not hide the service's.
      const where = describeConnection(config.postgresql.connectionUrl);
      const checks = [
        ...connectionChecks(config.postgresql.connectionUrl, err),
        ...(await checkService()),
        ...routeChecks(outbound, peersOf(registry, kind, config, env)),
      ];
      io.out(formatChecks(checkHeading(`${where.host}:${where.port}/${where.database}`), checks));
      return EXIT.preflightFailed;
    }
    // The cause and its fix come from one table (src/postgres/connect-errors.ts).
    const where = describeConnection(config.postgresql.connectionUrl);
    const cause =
      err instanceof PostgresConnectError
        ? err.message
        : `${errorMessage(err)}; fix: check that this machine can reach the database and the password in postgresql.connection_url`;
    log.error(`cannot connect to PostgreSQL at ${where.host}:${where.port}, database "${where.database}", as ${where.user}: ${cause}`);
    return EXIT.failure;
  }
  log.debug(`connected: ${describeSecurity(db.security)}`);
  if (invocation.command === 'plans') return printPlans(io, db, config, invocation.set, log);
  let target: Target | undefined;
  try {
    target = await registry.definitionOf(kind).create(kind, { db, config, log, outbound });
    const journal = Journal.open(cwd, target.identity);
    const ctx: ApplyContext = { db, target, journal, config, log };
    switch (invocation.command) {
      case 'check': {
        const checks = [
          ...(await runPreflight(db, target, journal)),
          ...(config.postgresql.includePlans ? await planCheckLines(db, config) : []),
          ...(await checkService()),
          ...routeChecks(outbound, peersOf(registry, kind, config, env)),
        ];
        io.out(formatChecks(checkHeading(target.identity), checks));
        return preflightPassed(checks) ? EXIT.ok : EXIT.preflightFailed;
      }
      case 'once': {
        const report = await collectOnce(db, target, config, invocation.intervalSeconds);
        io.out(`${JSON.stringify(report, null, 2)}\n`);
        return EXIT.ok;
      }
      case 'apply': {
        const recovered = await recoverOnStart(ctx);
        if (recovered && recovered.status !== 'applied') return printOutcome(io, recovered);
        return printOutcome(io, await applyChange(ctx, invocation.apply, { accept: true }));
      }
      case 'run': {
        log.info(
          `tuner-agent ${AGENT_VERSION} starting: ${target.identity}, ${tuningMode(config)} mode, connection ${describeSecurity(db.security)}`,
        );
        log.info(`the tuning service at ${config.tuner.serverUrl!} is reached ${outbound.describe(config.tuner.serverUrl!)}`);
        const service = createServiceClient({
          serverUrl: config.tuner.serverUrl!,
          apiKey: config.tuner.apiKey!,
          databaseId: config.tuner.databaseId!,
          dispatcher: outbound.dispatcher,
        });
        const metricsServer = await serveMetrics(invocation, config, kind, log);
        if (metricsServer === 'malformed' || metricsServer === 'unavailable')
          return metricsServer === 'malformed' ? EXIT.usage : EXIT.failure;
        const stop = stopWhenAsked(log);
        try {
          const end = await runLoop({
            ctx,
            service,
            databaseId: config.tuner.databaseId!,
            cwd,
            signal: stop.signal,
            ...(metricsServer && { metrics: metricsServer.metrics }),
          });
          return end.atKnownGood && !stop.failed() ? EXIT.ok : EXIT.failure;
        } finally {
          stop.dispose();
          await metricsServer?.close();
        }
      }
      case 'revert': {
        await recoverOnStart(ctx);
        const outcome = await restore(ctx, 'baseline', 'revert requested');
        if (!outcome) {
          io.out('nothing to revert: the agent has changed no parameter of this database\n');
          return EXIT.ok;
        }
        return printOutcome(io, outcome, 'reverted');
      }
    }
    return EXIT.usage;
  } catch (err) {
    if (err instanceof UsageError) {
      log.error(err.message);
      return EXIT.usage;
    }
    if (err instanceof ServiceRejectedError) {
      log.error(
        err.code === 'agent_conflict'
          ? `another agent already reports for this database: ${err.message}; run one agent per database`
          : err.message,
      );
      return err.code === 'agent_conflict' ? EXIT.conflict : EXIT.rejected;
    }
    if (err instanceof JournalError) {
      log.error(err.message);
      return EXIT.failure;
    }
    log.error(errorMessage(err));
    if (config.tuner.debug && err instanceof Error && err.stack) log.debug(err.stack);
    return EXIT.failure;
  } finally {
    await target?.close();
    await db.close();
  }
}

/** `plans`: the probe's answer as JSON on stdout; it needs only the database, not the target. */
async function printPlans(io: Io, db: Db, config: AgentConfig, settings: Record<string, string>, log: Logger): Promise<number> {
  try {
    const result = await probePlans(db, { settings, includeTexts: config.postgresql.includeQueries });
    io.out(`${JSON.stringify(result, null, 2)}\n`);
    return EXIT.ok;
  } catch (err) {
    log.error(`the planner probe failed: ${errorMessage(err)}`);
    return EXIT.failure;
  } finally {
    await db.close();
  }
}

/** --check's lines for the planner probe (include_plans); one FAIL line when it cannot run at all. */
async function planCheckLines(db: Db, config: AgentConfig): Promise<PreflightCheck[]> {
  try {
    return await planChecks(db, config.postgresql.includeQueries);
  } catch (err) {
    return [
      {
        name: 'the planner probe plans the top statements (include_plans)',
        ok: false,
        detail: `could not be checked: ${errorMessage(err)}`,
        fix: "check that pg_stat_statements is readable by the agent's user (pg_monitor)",
        unchecked: true,
      },
    ];
  }
}

/** Prometheus metrics, when an address is given (the flag wins over tuner.metrics_listen); or
 * why not, said in the log: a malformed address (a usage error), or one that cannot be listened
 * on now (in use: a runtime failure, which a supervisor's restart may get past). */
async function serveMetrics(
  invocation: Invocation,
  config: AgentConfig,
  kind: TargetKind,
  log: Logger,
): Promise<AgentMetricsServer | undefined | 'malformed' | 'unavailable'> {
  const text = invocation.metricsListen ?? config.tuner.metricsListen;
  if (text === undefined) return undefined;
  const source = invocation.metricsListen !== undefined ? '--metrics-listen' : 'tuner.metrics_listen (AGENT_TUNER_METRICS_LISTEN)';
  const { parseMetricsListen, startAgentMetrics } = await import('./metrics.ts');
  const address = parseMetricsListen(text, source);
  if ('problem' in address) {
    log.error(address.problem);
    return 'malformed';
  }
  try {
    const server = await startAgentMetrics(address, { target: kind });
    log.info(`Prometheus metrics on ${server.url}`);
    return server;
  } catch (err) {
    log.error(`${source}: cannot listen on ${text}: ${errorMessage(err)}; choose a free port, or leave metrics off`);
    return 'unavailable';
  }
}

const STOP_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'] as const;

/**
 * What stops the run: the first SIGTERM, SIGINT or SIGHUP (a closed terminal), or an error that
 * escaped everything else. Each lets the loop return the database to known-good before the
 * process exits; a second signal ends the process at once.
 */
function stopWhenAsked(log: Logger): { signal: AbortSignal; failed: () => boolean; dispose: () => void } {
  const controller = new AbortController();
  let failed = false;
  const onSignal = (name: NodeJS.Signals) => {
    if (controller.signal.aborted) {
      log.error(`${name} again: exiting at once; the next start returns the database to known-good`);
      process.exit(128 + osConstants.signals[name]);
    }
    log.info(`${name}: stopping`);
    controller.abort();
  };
  const onError = (err: unknown) => {
    failed = true;
    log.error(`unexpected error: ${errorMessage(err)}; stopping`);
    if (err instanceof Error && err.stack) log.debug(err.stack);
    controller.abort();
  };
  for (const name of STOP_SIGNALS) process.on(name, onSignal);
  process.on('uncaughtException', onError);
  process.on('unhandledRejection', onError);
  return {
    signal: controller.signal,
    failed: () => failed,
    dispose: () => {
      for (const name of STOP_SIGNALS) process.off(name, onSignal);
      process.off('uncaughtException', onError);
      process.off('unhandledRejection', onError);
    },
  };
}
