// `--local` refuses a Patroni member, naming `--patroni`: ALTER SYSTEM on one member is not seen
// by the others, Patroni may overwrite it, and a failover loses it (patroni/detect.ts tells).
import { describeConnection } from '../../../postgres/connect.ts';
import type { Db } from '../../database/db.ts';
import { detectPatroni, localRefusal } from '../patroni/detect.ts';

export async function refuseOnPatroniMember(db: Db, connectionUrl: string): Promise<void> {
  const evidence = await detectPatroni(db, { host: describeConnection(connectionUrl).host });
  if (evidence) throw new Error(localRefusal(evidence));
}
