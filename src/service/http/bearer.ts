// `Authorization: Bearer <token>`, as the agents send their API key and Prometheus the metrics
// token: one reading of the header for both.

/** The header's token; null when there is no header, another scheme, or no token. */
export function bearerToken(header: string | undefined): string | null {
  return /^Bearer\s+(\S+)\s*$/i.exec(header ?? '')?.[1] ?? null;
}
