// tuner-service's command line: read the configuration, start, and stop cleanly on SIGTERM, SIGINT
// or SIGHUP (a closed terminal; Node's default for it ends the process with the storage open).
import { ConfigError, HELP, parseServiceArgs } from './config.ts';
import { startService } from './server.ts';
import { SERVICE_VERSION } from './version.ts';

export async function main(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let request;
  try {
    request = parseServiceArgs(argv, env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`tuner-service: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  if (request.kind === 'help') {
    process.stdout.write(HELP);
    return 0;
  }
  if (request.kind === 'version') {
    process.stdout.write(`tuner-service ${SERVICE_VERSION}\n`);
    return 0;
  }
  const { config } = request;
  let service;
  try {
    service = await startService(config);
  } catch (err) {
    process.stderr.write(`tuner-service: cannot start: ${(err as Error).message}\n`);
    return 1;
  }
  const storage = config.databaseUrl ? 'PostgreSQL (TUNER_DATABASE_URL)' : `embedded PGlite in ${config.dataDir}`;
  process.stdout.write(`tuner-service ${SERVICE_VERSION} listening on ${service.url} (storage: ${storage})\n`);
  if (service.metricsUrl) process.stdout.write(`tuner-service: Prometheus metrics on ${service.metricsUrl}\n`);
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      process.stdout.write(`tuner-service: ${signal}, stopping\n`);
      resolve();
    };
    for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.once(signal, () => stop(signal));
  });
  await service.close();
  return 0;
}
