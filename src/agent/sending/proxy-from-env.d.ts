// proxy-from-env ships no types: the one function the agent uses.
declare module 'proxy-from-env' {
  /** The proxy for `url` from HTTP_PROXY/HTTPS_PROXY/ALL_PROXY and NO_PROXY (either case), or ''. */
  export function getProxyForUrl(url: string | URL): string;
}
