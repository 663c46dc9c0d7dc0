// Why a fetch failed, in words for the line that reports it. fetch throws `TypeError: fetch
// failed` with the reason down its cause chain: a system error with a code (ECONNREFUSED, a TLS
// verification code), or, when a proxy refused the tunnel, a DOMException ("Request was
// cancelled", whose legacy numeric `code` is 0) caused by undici's "Proxy response (407) !== 200".
// Only strings come out of here: the redaction and the messages take text.
const PROXY_STATUS = /Proxy response \((\d{3})\)/;

/** What a proxy's refusal of the tunnel means, by its status. */
export function proxyRefusal(status: number): string {
  if (status === 407) {
    return 'the proxy asked for credentials (407 Proxy Authentication Required): put its user name and password in the proxy URL (tuner.proxy_url or HTTPS_PROXY, percent-encoded), or check them';
  }
  // Not the standard answer, but tinyproxy's to a CONNECT with a wrong password.
  if (status === 401) {
    return 'the proxy refused its credentials (401 Unauthorized): check the user name and password in the proxy URL (tuner.proxy_url or HTTPS_PROXY, percent-encoded)';
  }
  return `the proxy refused the connection (${status})`;
}

/** The reason of a failed fetch: the proxy's refusal, else the innermost error's code (a string),
 * else its message. */
export function whyFetchFailed(err: unknown): string {
  const chain: unknown[] = [];
  for (let e: unknown = err; e !== undefined && e !== null && chain.length < 10; e = (e as { cause?: unknown }).cause) chain.push(e);
  const messages = chain.map((e) => (e instanceof Error ? e.message : typeof e === 'string' ? e : ''));
  for (const message of messages) {
    const status = PROXY_STATUS.exec(message)?.[1];
    if (status) return proxyRefusal(Number(status));
  }
  for (const e of chain.toReversed()) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && code !== '') return code;
  }
  return messages.toReversed().find((m) => m !== '') ?? String(err);
}
