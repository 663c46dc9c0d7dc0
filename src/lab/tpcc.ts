// A TPC-C-like database and transaction mix, as HammerDB's TPROC-C runs it on PostgreSQL: the
// nine tables of the TPC-C schema at a few warehouses, and the five transactions as PL/pgSQL
// functions (HammerDB calls stored procedures too), chosen by one dispatcher in the standard's
// proportions: new-order 45 %, payment 43 %, order-status, delivery and stock-level 4 % each.
// Simplified where it does not change what the server does: uniform random keys instead of
// NURand, one stock district column instead of ten, no remote warehouses. Not a TPC-C result.
import type { Cluster } from './cluster.ts';

/** Rows per warehouse, as the TPC-C schema sizes them. */
const DISTRICTS = 10;
const CUSTOMERS_PER_DISTRICT = 3000;
const ITEMS = 100_000;
/** The newest orders of each district that are not yet delivered. */
const UNDELIVERED = 900;

const SCHEMA = `
CREATE TABLE tpcc_item (i_id int PRIMARY KEY, i_name varchar(24), i_price numeric(5,2), i_data varchar(50));
CREATE TABLE tpcc_warehouse (w_id int PRIMARY KEY, w_name varchar(10), w_tax numeric(4,4), w_ytd numeric(12,2));
CREATE TABLE tpcc_district (d_w_id int, d_id int, d_name varchar(10), d_tax numeric(4,4), d_ytd numeric(12,2), d_next_o_id int,
  PRIMARY KEY (d_w_id, d_id));
CREATE TABLE tpcc_customer (c_w_id int, c_d_id int, c_id int, c_first varchar(16), c_last varchar(16), c_credit char(2),
  c_discount numeric(4,4), c_balance numeric(12,2), c_ytd_payment numeric(12,2), c_payment_cnt int, c_delivery_cnt int,
  c_data varchar(500), PRIMARY KEY (c_w_id, c_d_id, c_id));
CREATE TABLE tpcc_history (h_c_id int, h_c_d_id int, h_c_w_id int, h_d_id int, h_w_id int, h_date timestamp, h_amount numeric(6,2),
  h_data varchar(24));
CREATE TABLE tpcc_orders (o_w_id int, o_d_id int, o_id int, o_c_id int, o_entry_d timestamp, o_carrier_id int, o_ol_cnt int,
  PRIMARY KEY (o_w_id, o_d_id, o_id));
CREATE TABLE tpcc_new_order (no_w_id int, no_d_id int, no_o_id int, PRIMARY KEY (no_w_id, no_d_id, no_o_id));
CREATE TABLE tpcc_order_line (ol_w_id int, ol_d_id int, ol_o_id int, ol_number int, ol_i_id int, ol_supply_w_id int,
  ol_delivery_d timestamp, ol_quantity int, ol_amount numeric(6,2), ol_dist_info char(24), PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number));
CREATE TABLE tpcc_stock (s_w_id int, s_i_id int, s_quantity int, s_ytd int, s_order_cnt int, s_remote_cnt int, s_dist char(240),
  s_data varchar(50), PRIMARY KEY (s_w_id, s_i_id));
`;

function load(warehouses: number): string[] {
  const lastName = (n: string) => `(ARRAY['BAR','OUGHT','ABLE','PRI','PRES','ESE','ANTI','CALLY','ATION','EING'])[1 + (${n}) % 10]`;
  return [
    `INSERT INTO tpcc_item SELECT i, 'item ' || i, 1 + (i * 37 % 9900) / 100.0, repeat(md5(i::text), 1) FROM generate_series(1, ${ITEMS}) i`,
    `INSERT INTO tpcc_warehouse SELECT w, 'w' || w, 0.05, 300000 FROM generate_series(1, ${warehouses}) w`,
    `INSERT INTO tpcc_district SELECT w, d, 'd' || d, 0.07, 30000, ${CUSTOMERS_PER_DISTRICT} + 1
       FROM generate_series(1, ${warehouses}) w, generate_series(1, ${DISTRICTS}) d`,
    `INSERT INTO tpcc_customer SELECT w, d, c, md5(c::text)::varchar(16), ${lastName('c / 10')} || ${lastName('c')},
       CASE WHEN c % 10 = 0 THEN 'BC' ELSE 'GC' END, (c % 50) / 100.0, -10, 10, 1, 0, repeat(md5((w * d * c)::text), 10)
       FROM generate_series(1, ${warehouses}) w, generate_series(1, ${DISTRICTS}) d, generate_series(1, ${CUSTOMERS_PER_DISTRICT}) c`,
    `INSERT INTO tpcc_history SELECT c_id, c_d_id, c_w_id, c_d_id, c_w_id, now(), 10, 'initial' FROM tpcc_customer`,
    `INSERT INTO tpcc_orders SELECT w, d, o, 1 + (o * 7) % ${CUSTOMERS_PER_DISTRICT}, now(),
       CASE WHEN o <= ${CUSTOMERS_PER_DISTRICT - UNDELIVERED} THEN 1 + o % 10 END, 5 + o % 11
       FROM generate_series(1, ${warehouses}) w, generate_series(1, ${DISTRICTS}) d, generate_series(1, ${CUSTOMERS_PER_DISTRICT}) o`,
    `INSERT INTO tpcc_new_order SELECT o_w_id, o_d_id, o_id FROM tpcc_orders WHERE o_carrier_id IS NULL`,
    `INSERT INTO tpcc_order_line SELECT o_w_id, o_d_id, o_id, n, 1 + (o_id * 31 + n * 977) % ${ITEMS}, o_w_id,
       CASE WHEN o_carrier_id IS NOT NULL THEN o_entry_d END, 5, CASE WHEN o_carrier_id IS NULL THEN (n * 13 % 9999) / 100.0 ELSE 0 END,
       md5(n::text)::char(24) FROM tpcc_orders, generate_series(1, o_ol_cnt) n`,
    `INSERT INTO tpcc_stock SELECT w, i, 10 + i % 91, 0, 0, 0, repeat(md5(i::text), 7)::char(240), md5(w::text || i)
       FROM generate_series(1, ${warehouses}) w, generate_series(1, ${ITEMS}) i`,
    'CREATE INDEX tpcc_customer_name ON tpcc_customer (c_w_id, c_d_id, c_last, c_first)',
    'CREATE INDEX tpcc_orders_customer ON tpcc_orders (o_w_id, o_d_id, o_c_id, o_id)',
  ];
}

/** The five transactions and the dispatcher, as PL/pgSQL. Locks are taken in one order
 * (warehouse, district, customer; stock by item number) so that the mix does not deadlock. */
const FUNCTIONS = `
CREATE FUNCTION tpcc_new_order(w int, d int, c int, lines int) RETURNS numeric LANGUAGE plpgsql AS $$
DECLARE
  items int[] := ARRAY(SELECT DISTINCT 1 + floor(random() * ${ITEMS})::int FROM generate_series(1, lines) ORDER BY 1);
  o int; n int := 0; item int; total numeric := 0; price numeric;
BEGIN
  UPDATE tpcc_district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = w AND d_id = d RETURNING d_next_o_id - 1 INTO o;
  PERFORM c_discount, c_last, c_credit FROM tpcc_customer WHERE c_w_id = w AND c_d_id = d AND c_id = c;
  INSERT INTO tpcc_orders VALUES (w, d, o, c, now(), NULL, cardinality(items));
  INSERT INTO tpcc_new_order VALUES (w, d, o);
  FOREACH item IN ARRAY items LOOP
    n := n + 1;
    SELECT i_price INTO price FROM tpcc_item WHERE i_id = item;
    UPDATE tpcc_stock SET s_quantity = CASE WHEN s_quantity > 15 THEN s_quantity - 5 ELSE s_quantity + 86 END,
      s_ytd = s_ytd + 5, s_order_cnt = s_order_cnt + 1 WHERE s_w_id = w AND s_i_id = item;
    INSERT INTO tpcc_order_line VALUES (w, d, o, n, item, w, NULL, 5, price * 5, 'dist info');
    total := total + price * 5;
  END LOOP;
  RETURN total;
END $$;

CREATE FUNCTION tpcc_payment(w int, d int, c int, by_name boolean, amount numeric) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  customer int := c; last varchar(16);
BEGIN
  UPDATE tpcc_warehouse SET w_ytd = w_ytd + amount WHERE w_id = w;
  UPDATE tpcc_district SET d_ytd = d_ytd + amount WHERE d_w_id = w AND d_id = d;
  IF by_name THEN
    SELECT c_last INTO last FROM tpcc_customer WHERE c_w_id = w AND c_d_id = d AND c_id = c;
    SELECT c_id INTO customer FROM tpcc_customer WHERE c_w_id = w AND c_d_id = d AND c_last = last ORDER BY c_first
      OFFSET (SELECT count(*) / 2 FROM tpcc_customer WHERE c_w_id = w AND c_d_id = d AND c_last = last) LIMIT 1;
  END IF;
  UPDATE tpcc_customer SET c_balance = c_balance - amount, c_ytd_payment = c_ytd_payment + amount, c_payment_cnt = c_payment_cnt + 1,
    c_data = CASE WHEN c_credit = 'BC' THEN left(customer || ' ' || amount || ' ' || c_data, 500) ELSE c_data END
    WHERE c_w_id = w AND c_d_id = d AND c_id = customer;
  INSERT INTO tpcc_history VALUES (customer, d, w, d, w, now(), amount, 'payment');
END $$;

CREATE FUNCTION tpcc_order_status(w int, d int, c int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  o int; lines bigint;
BEGIN
  PERFORM c_balance, c_first, c_last FROM tpcc_customer WHERE c_w_id = w AND c_d_id = d AND c_id = c;
  SELECT o_id INTO o FROM tpcc_orders WHERE o_w_id = w AND o_d_id = d AND o_c_id = c ORDER BY o_id DESC LIMIT 1;
  SELECT count(*) INTO lines FROM (SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM tpcc_order_line
    WHERE ol_w_id = w AND ol_d_id = d AND ol_o_id = o) l;
  RETURN lines;
END $$;

CREATE FUNCTION tpcc_delivery(w int, carrier int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  o int; c int; total numeric;
BEGIN
  FOR d IN 1..${DISTRICTS} LOOP
    DELETE FROM tpcc_new_order WHERE (no_w_id, no_d_id, no_o_id) =
      (SELECT no_w_id, no_d_id, no_o_id FROM tpcc_new_order WHERE no_w_id = w AND no_d_id = d ORDER BY no_o_id LIMIT 1 FOR UPDATE SKIP LOCKED)
      RETURNING no_o_id INTO o;
    CONTINUE WHEN o IS NULL;
    UPDATE tpcc_orders SET o_carrier_id = carrier WHERE o_w_id = w AND o_d_id = d AND o_id = o RETURNING o_c_id INTO c;
    UPDATE tpcc_order_line SET ol_delivery_d = now() WHERE ol_w_id = w AND ol_d_id = d AND ol_o_id = o;
    SELECT sum(ol_amount) INTO total FROM tpcc_order_line WHERE ol_w_id = w AND ol_d_id = d AND ol_o_id = o;
    UPDATE tpcc_customer SET c_balance = c_balance + coalesce(total, 0), c_delivery_cnt = c_delivery_cnt + 1
      WHERE c_w_id = w AND c_d_id = d AND c_id = c;
  END LOOP;
END $$;

CREATE FUNCTION tpcc_stock_level(w int, d int, threshold int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  next int; low bigint;
BEGIN
  SELECT d_next_o_id INTO next FROM tpcc_district WHERE d_w_id = w AND d_id = d;
  SELECT count(DISTINCT s_i_id) INTO low FROM tpcc_order_line JOIN tpcc_stock ON s_w_id = w AND s_i_id = ol_i_id
    WHERE ol_w_id = w AND ol_d_id = d AND ol_o_id >= next - 20 AND ol_o_id < next AND s_quantity < threshold;
  RETURN low;
END $$;

-- One call per transaction: kind 1-45 new-order, 46-88 payment, 89-92 order-status, 93-96 delivery, 97-100 stock-level.
CREATE FUNCTION tpcc(kind int, w int, d int, c int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF kind <= 45 THEN PERFORM tpcc_new_order(w, d, c, 5 + c % 11);
  ELSIF kind <= 88 THEN PERFORM tpcc_payment(w, d, c, c % 10 < 6, 1 + (c % 5000));
  ELSIF kind <= 92 THEN PERFORM tpcc_order_status(w, d, c);
  ELSIF kind <= 96 THEN PERFORM tpcc_delivery(w, 1 + c % 10);
  ELSE PERFORM tpcc_stock_level(w, d, 10 + c % 11);
  END IF;
END $$;
`;

/** Creates and fills the TPC-C-like tables at `warehouses` (about 90 MB each) and its functions. */
export async function tpccSetup(cluster: Cluster, warehouses: number): Promise<void> {
  await cluster.sql(SCHEMA);
  for (const statement of load(warehouses)) await cluster.sql(statement);
  await cluster.sql(FUNCTIONS);
  await cluster.sql('VACUUM ANALYZE');
}

/** One transaction of the mix, in pgbench's script language; `:warehouses` comes from outside. */
export const TPCC_SCRIPT = [
  '\\set kind random(1, 100)',
  '\\set w random(1, :warehouses)',
  `\\set d random(1, ${DISTRICTS})`,
  `\\set c random(1, ${CUSTOMERS_PER_DISTRICT})`,
  'SELECT tpcc(:kind, :w, :d, :c);',
  '',
].join('\n');
