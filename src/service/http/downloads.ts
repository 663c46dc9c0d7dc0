// What an operator's host fetches without logging in: GET /install.sh (the spec's
// {install_script_url}) and, under /downloads/, the tuner-agent binaries with their SHA256SUMS,
// from the downloads directory (--downloads-dir), exactly as the build wrote them. The installer
// names the service by --public-url, or by its listen address (http/public-url.ts).
import { createReadStream, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ServiceContext } from '../app/context.ts';
import { SUMS_FILE, readDownloads } from '../setup/downloads.ts';
import { errorBody } from './errors.ts';
import { UNCONFIGURED_URL_NOTE, serviceUrl } from './public-url.ts';

export const INSTALL_PATH = '/install.sh';
export const DOWNLOADS_PREFIX = '/downloads';

const INSTALL_TEMPLATE = readFileSync(join(import.meta.dirname, '..', 'setup', 'install.sh'), 'utf8');

/** A URL that is safe inside single quotes in a shell script: scheme, host, port, path only. */
const SAFE_URL =
  /^https?:\/\/[A-Za-z0-9.-]+(:\d{1,5})?(\/[A-Za-z0-9._~/-]*)?$|^https?:\/\/\[[0-9A-Fa-f:.]+\](:\d{1,5})?(\/[A-Za-z0-9._~/-]*)?$/;

/** The installer with this service's address in it, and a comment saying when that is only the
 * listen address (no --public-url). */
export function installScript(url: string, configured = true): string | null {
  if (!SAFE_URL.test(url)) return null;
  const note = configured ? '' : `# ${UNCONFIGURED_URL_NOTE}.\n`;
  return INSTALL_TEMPLATE.replace('SERVICE_URL=__SERVICE_URL__', `${note}SERVICE_URL='${url.replace(/\/+$/, '')}'`);
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
