// `--check` for the Patroni target: the REST API reached on each configured member,
// authenticated for the calls that change things, the cluster's state (a running leader, its
// replicas up) and the DCS reachable through Patroni. Each failure says how to fix it.
import type { PreflightCheck } from '../../../target/target.ts';
import { PatroniApiError, type PatroniApi } from './api.ts';
import type { PatroniConfig } from './config.ts';
import { isLeader } from './write.ts';

/** Patroni refreshes dcs_last_seen every loop; older than this (beyond its ttl) means the DCS is
 * out of Patroni's reach. Clocks of the agent and Patroni's host may differ a little. */
const DCS_SLACK_S = 10;

export async function patroniPreflight(api: PatroniApi, config: Pick<PatroniConfig, 'username'>): Promise<PreflightCheck[]> {
  const checks: PreflightCheck[] = [];
  const reachable: string[] = [];
  const dcsAges: Array<{ root: string; age: number | null }> = [];
  for (const root of api.urls) {
    try {
      const status = await api.memberStatus(root);
      reachable.push(root);
      dcsAges.push({ root, age: status.dcs_last_seen === undefined ? null : Date.now() / 1000 - status.dcs_last_seen });
      checks.push({
        name: `Patroni REST API ${root}`,
        ok: true,
        detail: `${status.role}, ${status.state}, Patroni ${status.patroni?.version ?? '?'}`,
      });
    } catch (err) {
      checks.push({
        name: `Patroni REST API ${root}`,
        ok: false,
        // One member down is what Patroni is for; none reached fails below.
        severity: 'warning',
        detail: (err as Error).message,
        fix: `check patroni.rest_api_urls against that member's restapi.listen / connect_address, that Patroni runs there, and that this host may reach its port (and patroni.cafile when it serves https)`,
      });
    }
  }
  if (reachable.length === 0) {
    checks.push({
      name: 'Patroni REST API reachable',
      ok: false,
      detail: `none of ${api.urls.join(', ')} answered GET /patroni`,
      fix: "set patroni.rest_api_urls to the members' REST API addresses (Patroni's restapi.connect_address, e.g. http://pg1:8008)",
    });
    return checks;
  }

  // PATCH /config with an empty object: Patroni checks the credentials first, then refuses the
  // empty body (400) without touching anything, so a 400 proves the credentials work.
  try {
    const res = await api.request(reachable[0]!, 'PATCH', '/config', {});
    const ok = res.status === 400 || res.status === 200;
    checks.push({
      name: 'Patroni REST API authentication (PATCH /config, POST /restart)',
      ok,
      detail: ok
        ? config.username
          ? `accepted for ${config.username}`
          : 'the REST API asks for no credentials'
        : `HTTP ${res.status}: ${typeof res.body === 'string' ? res.body.slice(0, 120) : ''}`.trim(),
      ...(!ok && {
        fix:
          res.status === 401
            ? "set patroni.username and patroni.password to Patroni's restapi.authentication (AGENT_PATRONI_USERNAME, AGENT_PATRONI_PASSWORD)"
            : "allow this host in Patroni's restapi.allowlist, or give a client certificate (patroni.certfile, patroni.keyfile) when restapi.verify_client is set",
      }),
    });
  } catch (err) {
    checks.push({
      name: 'Patroni REST API authentication',
      ok: false,
      detail: (err as Error).message,
      unchecked: err instanceof PatroniApiError,
    });
  }

  try {
    const cluster = await api.cluster();
    const leader = cluster.members.find(isLeader);
    const down = cluster.members.filter((m) => !isLeader(m) && m.state !== 'running' && m.state !== 'streaming');
    checks.push({
      name: "the Patroni cluster's state",
      ok: leader !== undefined && leader.state === 'running' && down.length === 0,
      detail: `${cluster.members.map((m) => `${m.name} ${m.role} ${m.state}`).join(', ')}`,
      ...(!leader && { fix: 'the cluster has no leader: wait for Patroni to elect one (patronictl list), then check again' }),
      ...(leader &&
        down.length > 0 && { fix: `bring ${down.map((m) => m.name).join(', ')} back (patronictl list shows why), then check again` }),
    });
  } catch (err) {
    checks.push({
      name: "the Patroni cluster's state",
      ok: false,
      detail: (err as Error).message,
      fix: 'check that GET /cluster answers on a member',
    });
  }

  let ttl = 30;
  try {
    ttl = (await api.dynamicConfig()).ttl ?? ttl;
  } catch {
    // the default ttl then
  }
  const stale = dcsAges.filter((d) => d.age === null || d.age > ttl + DCS_SLACK_S);
  checks.push({
    name: 'the DCS reachable through Patroni',
    ok: stale.length === 0,
    detail:
      stale.length === 0
        ? `every reached member saw the DCS within ${ttl} s`
        : stale.map((d) => `${d.root}: ${d.age === null ? 'never' : `${Math.round(d.age)} s ago`}`).join(', '),
    ...(stale.length > 0 && {
      fix: "Patroni has not reached its DCS (etcd, Consul, ZooKeeper) lately: check the DCS and the member's connection to it (patroni's log); changes are refused while it is away",
    }),
  });
  return checks;
}
