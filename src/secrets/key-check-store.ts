import type { Db } from '../db/schema.ts';

/** U7: the rows behind the secret key's start-up check and the sealing of older plain secrets. */

/** The check the database keeps; the first process to start writes its own. */
export async function keptKeyCheck(db: Db, mine: string): Promise<string> {
  await db
    .insertInto('secret_key_checks')
    .values({ key_check: mine })
    .onConflict((oc) => oc.doNothing())
    .execute();
  const row = await db.selectFrom('secret_key_checks').select('key_check').executeTakeFirstOrThrow();
  return row.key_check;
}

/** Webhook secrets stored before sealing (no `sealed:` prefix). */
export async function plainWebhookSecrets(db: Db): Promise<Array<{ id: string; secret: string }>> {
  return db
    .selectFrom('webhook_endpoints')
    .select(['id', 'secret'])
    .where('secret', 'not like', 'sealed:%')
    .execute();
}

/** Replaces a plain secret by its sealed form, only if it is still that plain one. */
export async function replacePlainSecret(db: Db, id: string, plain: string, sealed: string): Promise<void> {
  await db
    .updateTable('webhook_endpoints')
    .set({ secret: sealed })
    .where('id', '=', id)
    .where('secret', '=', plain)
    .execute();
}
