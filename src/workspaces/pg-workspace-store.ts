import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { sql } from 'kysely';
import type { Db, Tx } from '../db/schema.ts';
import { isUuid } from '../domain/ids.ts';
import { isScope, Role, type Scope } from '../domain/roles.ts';
import { ApiKeyStatus, apiKeyStatus, apiKeyView, type ApiKeyView } from './api-keys.ts';

export interface CreatedKey {
  workspaceId: string;
  keyId: string;
  /** Shown once; only its SHA-256 is stored (S1). */
  apiKey: string;
}

export type RevokeOutcome =
  | { outcome: 'revoked'; key: ApiKeyView }
  | { outcome: 'already_revoked'; key: ApiKeyView }
  | { outcome: 'last_key'; key: ApiKeyView }
  | { outcome: 'not_found' };

const KEY_PREFIX = 'vbt_';

function hashKey(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

/** What a key view reads of its row: never the hash. */
const API_KEY_VIEW_COLUMNS = [
  'id',
  'workspace_id',
  'name',
  'prefix',
  'created_at',
  'last_used_at',
  'expires_at',
  'revoked_at',
  'user_id',
  'scopes',
] as const;

export class PgWorkspaceStore {
  constructor(private readonly db: Db) {}

  async createWorkspace(name: string): Promise<string> {
    const id = randomUUID();
    await this.db.insertInto('workspaces').values({ id, name }).execute();
    return id;
  }

  /** The workspaces, oldest first (the CLI names them). */
  async listWorkspaces(): Promise<Array<{ id: string; name: string }>> {
    return this.db
      .selectFrom('workspaces')
      .select(['id', 'name'])
      .orderBy('created_at')
      .orderBy('id')
      .execute();
  }

  /** F5: the workspace's share of each queue; false when there is no such workspace. */
  setFairWeight(workspaceId: string, weight: number): Promise<boolean> {
    return this.setOperatorFields(workspaceId, { fair_weight: weight });
  }

  /** F7: its cap on audio hours transcribed a month (null: none). False when there is no such workspace. */
  setMonthlyHoursCap(workspaceId: string, cap: number | null): Promise<boolean> {
    return this.setOperatorFields(workspaceId, { monthly_hours_cap: cap });
  }

  /** F5: at most `cap` of its batch jobs run at once (null: no cap). False when there is no such workspace. */
  setMaxRunningJobs(workspaceId: string, cap: number | null): Promise<boolean> {
    return this.setOperatorFields(workspaceId, { max_running_jobs: cap });
  }

  private async setOperatorFields(
    workspaceId: string,
    fields: { fair_weight?: number; monthly_hours_cap?: number | null; max_running_jobs?: number | null },
  ): Promise<boolean> {
    const updated = await this.db
      .updateTable('workspaces')
      .set(fields)
      .where('id', '=', workspaceId)
      .executeTakeFirst();
    return Number(updated.numUpdatedRows) > 0;
  }

  /** A workspace's name (U9: an invite email names it), or null when there is none. */
  async nameOf(workspaceId: string): Promise<string | null> {
    const row = await this.db
      .selectFrom('workspaces')
      .select('name')
      .where('id', '=', workspaceId)
      .executeTakeFirst();
    return row?.name ?? null;
  }

  /** The oldest workspace of that name, if any (names are not unique). */
  async workspaceIdByName(name: string): Promise<string | null> {
    const row = await this.db
      .selectFrom('workspaces')
      .select('id')
      .where('name', '=', name)
      .orderBy('created_at')
      .executeTakeFirst();
    return row?.id ?? null;
  }

  /** Whether any key was ever made (a fresh installation has none). */
  async anyApiKey(): Promise<boolean> {
    return (await this.db.selectFrom('api_keys').select('id').limit(1).executeTakeFirst()) !== undefined;
  }

  async createApiKey(
    workspaceId: string,
    name: string,
    opts: { expiresAt?: Date | null; userId?: string | null; scopes?: Scope[] } = {},
  ): Promise<CreatedKey> {
    return (await this.insertKey(workspaceId, name, opts, null))!;
  }

  /**
   * U6: as createApiKey, unless the workspace already holds `maxActive` active keys (null). Counted
   * and inserted under the workspace's key lock, so parallel requests cannot pass the cap together.
   */
  async createApiKeyUnderCap(
    workspaceId: string,
    name: string,
    opts: { expiresAt?: Date | null; userId?: string | null; scopes?: Scope[] },
    maxActive: number,
  ): Promise<CreatedKey | null> {
    return this.insertKey(workspaceId, name, opts, maxActive);
  }

  private async insertKey(
    workspaceId: string,
    name: string,
    opts: { expiresAt?: Date | null; userId?: string | null; scopes?: Scope[] },
    maxActive: number | null,
  ): Promise<CreatedKey | null> {
    const prefix = randomBytes(6).toString('hex');
    const secret = randomBytes(24).toString('base64url');
    const apiKey = `${KEY_PREFIX}${prefix}_${secret}`;
    const keyId = randomUUID();
    const created = await this.db.transaction().execute(async (trx) => {
      if (maxActive !== null) {
        await sql`select pg_advisory_xact_lock(hashtext(${`api-keys:${workspaceId}`}))`.execute(trx);
        const active = await trx
          .selectFrom('api_keys')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .where('workspace_id', '=', workspaceId)
          .where('revoked_at', 'is', null)
          .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', sql<Date>`now()`)]))
          .executeTakeFirstOrThrow();
        if (Number(active.n) >= maxActive) return false;
      }
      await trx
        .insertInto('api_keys')
        .values({
          id: keyId,
          workspace_id: workspaceId,
          name,
          prefix,
          key_hash: hashKey(apiKey),
          expires_at: opts.expiresAt ?? null,
          user_id: opts.userId ?? null,
          ...(opts.scopes ? { scopes: opts.scopes } : {}),
        })
        .execute();
      return true;
    });
    return created ? { workspaceId, keyId, apiKey } : null;
  }

  /** S9: keys without their secrets or hashes; one workspace's, or every workspace's (the CLI). */
  async listApiKeys(
    workspaceId: string | null,
    opts: { userId?: string | null } = {},
  ): Promise<ApiKeyView[]> {
    const now = await this.now();
    const rows = await this.db
      .selectFrom('api_keys')
      .select(API_KEY_VIEW_COLUMNS)
      .$if(workspaceId !== null, (q) => q.where('workspace_id', '=', workspaceId!))
      .$if(opts.userId !== undefined, (q) =>
        q.where('user_id', opts.userId === null ? 'is' : '=', opts.userId!),
      )
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    return rows.map((row) => apiKeyView(row, now));
  }

  /**
   * S9: revokes a key; the next request with it gets 401 (authenticate reads the row every time,
   * nothing caches a key). `workspaceId` confines it to that workspace's keys (the API); with
   * `keepOne` a workspace's last active key is kept, so an API caller cannot lock itself out.
   */
  async revokeApiKey(
    keyId: string,
    opts: { workspaceId?: string; keepOne?: boolean; userId?: string | null } = {},
  ): Promise<RevokeOutcome> {
    if (!isUuid(keyId)) return { outcome: 'not_found' };
    return this.db.transaction().execute(async (trx) => {
      // The workspace row first: two revokes in one workspace serialize here, so both cannot pass
      // the last-key check at once.
      const owner = await trx
        .selectFrom('workspaces')
        .innerJoin('api_keys', 'api_keys.workspace_id', 'workspaces.id')
        .select('workspaces.id')
        .where('api_keys.id', '=', keyId)
        .$if(opts.workspaceId !== undefined, (q) => q.where('workspaces.id', '=', opts.workspaceId!))
        .$if(opts.userId !== undefined, (q) =>
          q.where('api_keys.user_id', opts.userId === null ? 'is' : '=', opts.userId!),
        )
        .forUpdate('workspaces')
        .executeTakeFirst();
      if (!owner) return { outcome: 'not_found' };
      const key = await trx
        .selectFrom('api_keys')
        .select(API_KEY_VIEW_COLUMNS)
        .where('id', '=', keyId)
        .executeTakeFirstOrThrow();
      const now = await this.now(trx);
      if (key.revoked_at) return { outcome: 'already_revoked', key: apiKeyView(key, now) };
      if (opts.keepOne && apiKeyStatus(key, now) === ApiKeyStatus.active) {
        const others = await trx
          .selectFrom('api_keys')
          .select('id')
          .where('workspace_id', '=', key.workspace_id)
          .where('id', '<>', key.id)
          .where('revoked_at', 'is', null)
          .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now)]))
          .limit(1)
          .executeTakeFirst();
        if (!others) return { outcome: 'last_key', key: apiKeyView(key, now) };
      }
      const revoked = await trx
        .updateTable('api_keys')
        .set({ revoked_at: now })
        .where('id', '=', key.id)
        .where('revoked_at', 'is', null)
        .returning([
          'id',
          'workspace_id',
          'name',
          'prefix',
          'created_at',
          'last_used_at',
          'expires_at',
          'revoked_at',
          'user_id',
          'scopes',
        ])
        .executeTakeFirstOrThrow();
      return { outcome: 'revoked', key: apiKeyView(revoked, now) };
    });
  }

  /** U3: a member removed from a workspace: every key of theirs there stops at its next request. */
  async revokeUserKeys(trx: Tx, workspaceId: string, userId: string): Promise<void> {
    await trx
      .updateTable('api_keys')
      .set({ revoked_at: sql<Date>`now()` })
      .where('workspace_id', '=', workspaceId)
      .where('user_id', '=', userId)
      .where('revoked_at', 'is', null)
      .execute();
  }

  /** The database's clock, the one authenticate compares expiry against. */
  private async now(db: Db = this.db): Promise<Date> {
    const { rows } = await sql<{ now: Date }>`select now() as now`.execute(db);
    return rows[0]!.now;
  }

  /**
   * The grant of a valid, unrevoked, unexpired key, else null. Read from the database on every
   * request: a revocation or expiry takes effect at the next request (S9), and so does a change of
   * its person's role; a key of someone no longer a member, or disabled, is refused (U6).
   */
  async authenticate(apiKey: string): Promise<KeyGrant | null> {
    const match = /^vbt_([0-9a-f]{12})_[A-Za-z0-9_-]+$/.exec(apiKey);
    if (!match?.[1]) return null;
    const row = await this.db
      .selectFrom('api_keys as k')
      .leftJoin('memberships as m', (join) =>
        join.onRef('m.user_id', '=', 'k.user_id').onRef('m.workspace_id', '=', 'k.workspace_id'),
      )
      .leftJoin('users as u', 'u.id', 'k.user_id')
      .select([
        'k.id',
        'k.workspace_id',
        'k.key_hash',
        'k.user_id',
        'k.scopes',
        'k.expires_at',
        'm.role',
        'u.disabled_at',
      ])
      .where('k.prefix', '=', match[1])
      .where('k.revoked_at', 'is', null)
      .where((eb) => eb.or([eb('k.expires_at', 'is', null), eb('k.expires_at', '>', sql<Date>`now()`)]))
      .executeTakeFirst();
    if (!row) return null;
    const expected = Buffer.from(row.key_hash, 'hex');
    const actual = Buffer.from(hashKey(apiKey), 'hex');
    if (expected.length !== actual.length || !timingSafeEqual(expected, actual)) return null;
    // A person's key acts with their role now; a service account's (no person) as an admin.
    if (row.user_id !== null && (row.role === null || row.disabled_at !== null)) return null;
    // F3: when it was last used, to the minute: a key in steady use (a stream's re-checks, a busy
    // client) writes once a minute, not on every request.
    await this.db
      .updateTable('api_keys')
      .set({ last_used_at: sql<Date>`now()` })
      .where('id', '=', row.id)
      .where((eb) =>
        eb.or([
          eb('last_used_at', 'is', null),
          eb('last_used_at', '<', sql<Date>`now() - interval '1 minute'`),
        ]),
      )
      .execute();
    return {
      keyId: row.id,
      workspaceId: row.workspace_id,
      userId: row.user_id,
      role: (row.role ?? Role.admin) as Role,
      scopes: row.scopes.filter(isScope),
      expiresAt: row.expires_at,
    };
  }
}

/** U6: what a key may act as. */
export interface KeyGrant {
  keyId: string;
  workspaceId: string;
  userId: string | null;
  role: Role;
  scopes: Scope[];
  expiresAt: Date | null;
}
