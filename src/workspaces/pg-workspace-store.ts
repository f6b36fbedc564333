import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { sql } from 'kysely';
import type { Db } from '../db/schema.ts';

export interface CreatedKey {
  workspaceId: string;
  keyId: string;
  /** Shown once; only its SHA-256 is stored (S1). */
  apiKey: string;
}

const KEY_PREFIX = 'vbt_';

function hashKey(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

export class PgWorkspaceStore {
  constructor(private readonly db: Db) {}

  async createWorkspace(name: string): Promise<string> {
    const id = randomUUID();
    await this.db.insertInto('workspaces').values({ id, name }).execute();
    return id;
  }

  async createApiKey(workspaceId: string, name: string): Promise<CreatedKey> {
    const prefix = randomBytes(6).toString('hex');
    const secret = randomBytes(24).toString('base64url');
    const apiKey = `${KEY_PREFIX}${prefix}_${secret}`;
    const keyId = randomUUID();
    await this.db
      .insertInto('api_keys')
      .values({ id: keyId, workspace_id: workspaceId, name, prefix, key_hash: hashKey(apiKey) })
      .execute();
    return { workspaceId, keyId, apiKey };
  }

  /** Returns the caller's workspace for a valid, unrevoked key, else null. */
  async authenticate(apiKey: string): Promise<string | null> {
    const match = /^vbt_([0-9a-f]{12})_[A-Za-z0-9_-]+$/.exec(apiKey);
    if (!match?.[1]) return null;
    const row = await this.db
      .selectFrom('api_keys')
      .select(['id', 'workspace_id', 'key_hash'])
      .where('prefix', '=', match[1])
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    if (!row) return null;
    const expected = Buffer.from(row.key_hash, 'hex');
    const actual = Buffer.from(hashKey(apiKey), 'hex');
    if (expected.length !== actual.length || !timingSafeEqual(expected, actual)) return null;
    await this.db
      .updateTable('api_keys')
      .set({ last_used_at: sql<Date>`now()` })
      .where('id', '=', row.id)
      .execute();
    return row.workspace_id;
  }
}
