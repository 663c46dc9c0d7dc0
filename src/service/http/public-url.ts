// The address agents and browsers reach this service at: --public-url when set, otherwise the
// scheme and host the request came with.
import type { FastifyRequest } from 'fastify';
import type { ServiceConfig } from '../app/config.ts';

export function serviceUrl(config: Pick<ServiceConfig, 'publicUrl'>, request: FastifyRequest): string {
  return config.publicUrl ?? `${request.protocol}://${request.host}`;
}
