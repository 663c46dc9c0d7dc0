// The plan-aware tuning's workloads (issue 44): the e2e tests and bench/plans.ts share them.
//   coupon-check  an order check whose `IN (SELECT …)` under an OR is a hashed subplan only when
//                 the revoked coupons' hash table fits in work_mem × hash_mem_multiplier: about
//                 40 MB of work_mem on PostgreSQL 15, above what pgtune gives a 23 GB machine with
//                 100 connections (about 30 MB); plain, every order rescans the 80 MB list (a
//                 second a call here), hashed it is built once (0.2 s);
//   select-only   SELECT 1 and nothing else: no planner parameter can change anything.
import type { Workload } from './workloads.ts';

/** The coupon check against `revoked` revoked coupons: 80,000 make the hash table need about 40 MB
 * of work_mem (at hash_mem_multiplier 2); 20,000 about a quarter of that. */
export const couponCheck = (revoked: number): Workload => ({
  name: revoked === 80_000 ? 'coupon-check' : `coupon-check-${revoked}`,
  description: `orders checked against ${revoked} revoked coupons of 1 kB: a hashed subplan only when they fit in work_mem × hash_mem_multiplier, a plain one (several times slower) below`,
  async setup(cluster) {
    await cluster.sql(
      `CREATE TABLE revoked_coupons AS SELECT rpad(md5(g::text) || g::text, 1000, '-') AS code FROM generate_series(1, ${revoked}) g`,
    );
    // One order in ten carries a revoked coupon; the others' coupons are on no list.
    await cluster.sql(
      `CREATE TABLE coupon_orders AS
         SELECT g AS id, g % 97 = 0 AS flagged, rpad(md5(c::text) || c::text, 1000, '-') AS coupon
           FROM generate_series(1, 30) g, LATERAL (SELECT CASE WHEN g % 10 = 0 THEN g ELSE 100000 + g END AS c) k`,
    );
    await cluster.sql('CREATE TABLE coupon_kv AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 1000) g');
    await cluster.sql('ALTER TABLE coupon_kv ADD PRIMARY KEY (id)');
    await cluster.sql('ANALYZE revoked_coupons, coupon_orders, coupon_kv');
  },
  script: [
    '\\set id random(1, 1000)',
    'SELECT count(*) FROM coupon_orders WHERE flagged OR coupon IN (SELECT code FROM revoked_coupons);',
    // Cheap lookups beside it: every window has calls enough to judge.
    'SELECT v FROM coupon_kv WHERE id = :id;',
    'SELECT v FROM coupon_kv WHERE id = :id + 0;',
    'SELECT count(*) FROM coupon_kv WHERE id < :id;',
    'SELECT v FROM coupon_kv WHERE id = 1001 - :id;',
    '',
  ].join('\n'),
  clients: 2,
  mode: 'reload-only',
});

const SELECT_ONLY: Workload = {
  name: 'select-only',
  description: 'SELECT 1 alone: no parameter changes anything, and the planner says so',
  async setup() {},
  script: 'SELECT 1;\n',
  clients: 2,
  mode: 'reload-only',
};

export const PLAN_WORKLOADS = { 'coupon-check': couponCheck(80_000), 'select-only': SELECT_ONLY } as const satisfies Record<
  string,
  Workload
>;
