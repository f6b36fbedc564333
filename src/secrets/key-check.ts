import type { Db } from '../db/schema.ts';
import type { Logger } from '../log.ts';
import { keptKeyCheck, plainWebhookSecrets, replacePlainSecret } from './key-check-store.ts';
import type { SecretBox } from './secret-box.ts';

/**
 * U7: at start, after the migrations. A process whose key is not the one the database's secrets
 * were sealed with refuses to start, saying how to fix it (it would sign webhooks with secrets it
 * cannot read). Secrets stored before sealing existed are sealed.
 */
export async function checkSecretKey(db: Db, box: SecretBox, log: Logger): Promise<void> {
  const kept = await keptKeyCheck(db, box.check());
  if (kept !== box.check()) {
    throw new Error(
      'this process’s secret key is not the one the database’s secrets were sealed with: give every process the same VERBATIM_SECRET_KEY (or the same data dir’s `secret-key`)',
    );
  }
  const plain = await plainWebhookSecrets(db);
  for (const row of plain) await replacePlainSecret(db, row.id, row.secret, box.seal(row.secret));
  if (plain.length > 0) log.info({ sealed: plain.length }, 'webhook secrets stored in plain were sealed');
}
