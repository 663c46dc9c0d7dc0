// What an operator's host fetches without logging in: GET /install.sh (the spec's
// {install_script_url}), GET /install.ps1 (the same for Windows) and, under /downloads/, the tuner-agent binaries with their SHA256SUMS,
// from the downloads directory (--downloads-dir), exactly as the build wrote them. The installer
// names the service by --public-url, or by its listen address (http/public-url.ts).
import { createReadStream, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { TARGETS } from '../../agent/targets/registry.ts';
import type { ServiceContext } from '../app/context.ts';
import { SUMS_FILE, readDownloads } from '../setup/downloads.ts';
import { errorBody } from './errors.ts';
import { UNCONFIGURED_URL_NOTE, serviceUrl } from './public-url.ts';

export const INSTALL_PATH = '/install.sh';
export const INSTALL_PS1_PATH = '/install.ps1';
export const DOWNLOADS_PREFIX = '/downloads';

const INSTALL_TEMPLATE = readFileSync(join(import.meta.dirname, '..', 'setup', 'install.sh'), 'utf8');
const INSTALL_PS1_TEMPLATE = readFileSync(join(import.meta.dirname, '..', 'setup', 'install.ps1'), 'utf8');
/** The binary install.ps1 installs, as scripts/build-agent.ts names it. */
export const WINDOWS_BINARY = 'tuner-agent-windows-x64.exe';
/** The target install.ps1's next steps name first: on a Windows host, most likely the PostgreSQL
 * beside it; the others follow from the target registry. */
const WINDOWS_FIRST_TARGET = 'local';

/** The target install.sh's next steps name first: the one its template's commands use (the
 * spec's own steps), so that the others are listed after it, whatever the registry holds. */
const FIRST_TARGET = /\.\/tuner-agent --([a-z0-9-]+) --check/.exec(INSTALL_TEMPLATE)?.[1] ?? '';

/** Every registered target but `first`, as flags: the next steps name them all, whatever is registered. */
const otherTargets = (first: string) => TARGETS.kinds.filter((kind) => kind !== first).map((kind) => `--${kind}`);

/** A URL that is safe inside single quotes in a shell script: scheme, host, port, path only. */
const SAFE_URL =
  /^https?:\/\/[A-Za-z0-9.-]+(:\d{1,5})?(\/[A-Za-z0-9._~/-]*)?$|^https?:\/\/\[[0-9A-Fa-f:.]+\](:\d{1,5})?(\/[A-Za-z0-9._~/-]*)?$/;

/** The installer with this service's address in it, and a comment saying when that is only the
 * listen address (no --public-url). */
export function installScript(url: string, configured = true): string | null {
  if (!SAFE_URL.test(url)) return null;
  const note = configured ? '' : `# ${UNCONFIGURED_URL_NOTE}.\n`;
  return INSTALL_TEMPLATE.replace('SERVICE_URL=__SERVICE_URL__', () => `${note}SERVICE_URL='${url.replace(/\/+$/, '')}'`).replace(
    '__OTHER_TARGETS__',
    () => otherTargets(FIRST_TARGET).join(', '),
  );
}

/** The Windows installer (PowerShell) with this service's address in it; the same rule for the
 * address as install.sh (a URL safe in single quotes is safe in a PowerShell string too). */
export function installPowerShellScript(url: string, configured = true): string | null {
  if (!SAFE_URL.test(url)) return null;
  const note = configured ? '' : `# ${UNCONFIGURED_URL_NOTE}.\n`;
  // Replacer functions: `$` in a replacement string would be read as a pattern ($' and $&).
  return INSTALL_PS1_TEMPLATE.replace('$ServiceUrl = __SERVICE_URL__', () => `${note}$ServiceUrl = '${url.replace(/\/+$/, '')}'`)
    .replace('__BINARY_NAME__', () => WINDOWS_BINARY)
    .replace('__FIRST_TARGET__', () => WINDOWS_FIRST_TARGET)
    .replace('__OTHER_TARGETS__', () => otherTargets(WINDOWS_FIRST_TARGET).join(', '));
}

export function installScriptUrl(url: string): string {
  return `${url.replace(/\/+$/, '')}${INSTALL_PATH}`;
}

const notFound = (reply: FastifyReply, message: string) =>
  reply.code(404).type('application/json; charset=utf-8').send(errorBody('not_found', message));

export function registerDownloads(app: FastifyInstance, ctx: ServiceContext): void {
  const dir = ctx.config.downloadsDir;

  app.get(INSTALL_PATH, async (request, reply) => {
    const { url, configured } = serviceUrl(ctx.config, request);
    const script = installScript(url, configured);
    if (script === null) {
      return reply
        .code(400)
        .type('application/json; charset=utf-8')
        .send(errorBody('bad_request', "the service's address cannot go into a script; set --public-url"));
    }
    return reply.header('cache-control', 'no-store').type('text/x-shellscript; charset=utf-8').send(script);
  });

  app.get(INSTALL_PS1_PATH, async (request, reply) => {
    const { url, configured } = serviceUrl(ctx.config, request);
    const script = installPowerShellScript(url, configured);
    if (script === null) {
      return reply
        .code(400)
        .type('application/json; charset=utf-8')
        .send(errorBody('bad_request', "the service's address cannot go into a script; set --public-url"));
    }
    // PowerShell has no registered media type; as text a browser shows it instead of saving it,
    // and Invoke-WebRequest hands it over as a string.
    return reply
      .header('cache-control', 'no-store')
      .header('x-content-type-options', 'nosniff')
      .type('text/plain; charset=utf-8')
      .send(script);
  });

  app.get(`${DOWNLOADS_PREFIX}/${SUMS_FILE}`, async (_request, reply) => {
    let sums: Buffer;
    try {
      sums = readFileSync(join(dir, SUMS_FILE));
    } catch {
      return notFound(reply, 'this tuning service has no tuner-agent binaries: build them with npm run build:agent (docs/install.md)');
    }
    return reply.header('cache-control', 'no-store').type('text/plain; charset=utf-8').send(sums);
  });

  app.get<{ Params: { file: string } }>(`${DOWNLOADS_PREFIX}/:file`, async (request, reply) => {
    // Only the files the sums name: nothing else in the directory is reachable.
    const download = readDownloads(dir).binaries.find((b) => b.file === request.params.file);
    if (!download)
      return notFound(reply, `there is no ${request.params.file} here; see ${DOWNLOADS_PREFIX}/${SUMS_FILE} for what there is`);
    const path = join(dir, download.file);
    return reply
      .header('cache-control', 'no-store')
      .header('x-content-type-options', 'nosniff')
      .header('content-length', statSync(path).size)
      .header('content-disposition', `attachment; filename="${download.file}"`)
      .type('application/octet-stream')
      .send(createReadStream(path));
  });
}
