// HOST:PORT, as both programs take an address to listen at (tuner-service --listen and
// --metrics-listen, tuner-agent --metrics-listen): one reading for both. Each caller words its
// own message, with an example of its own port.

/** A host name or address (IPv6 in brackets), a colon, and a port of at most five digits. */
export const HOST_PORT_PATTERN = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/;

/** The host (IPv6 without its brackets) and port of `text`; undefined unless it matches
 * HOST_PORT_PATTERN. The port may still be above 65535: the caller says so its own way. */
export function hostAndPort(text: string): { host: string; port: number } | undefined {
  const m = HOST_PORT_PATTERN.exec(text);
  if (!m) return undefined;
  return { host: m[1]!.replace(/^\[|\]$/g, ''), port: Number(m[2]) };
}
