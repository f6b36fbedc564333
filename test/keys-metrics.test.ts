import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { buildApi } from '../src/api/server.ts';
import { ConfigError, loadConfig } from '../src/config.ts';
import { buildWebApp } from './support/browser.ts';
import {
  FAST_ENV,
  METRICS_AUTH,
  METRICS_TOKEN,
  spawnVerbatim,
  speechWav,
  startHarness,
  uploadMeeting,
  waitFor,
  type Harness,
} from './support/harness.ts';

/** A request with `key` instead of the harness's own key. */
async function as(h: Harness, key: string, method: string, url: string, body?: unknown) {
  return h.request(method, url, body, { authorization: `Bearer ${key}` });
}

void describe('API keys (issue 13 scope 6)', () => {
  let h: Harness;
  before(async () => {
    h = await startHarness();
  });
  after(async () => {
    await h?.close();
  });

  void it('S9: a revoked key gets 401 at once', async () => {
    const created = await h.request('POST', '/v1/api-keys', { name: 'laptop' });
    assert.equal(created.status, 201, created.text);
    const key = created.json.key as string;
    assert.match(key, /^vbt_[0-9a-f]{12}_/);
    assert.equal(created.json.status, 'active');
    assert.equal(created.json.name, 'laptop');
    assert.equal((await as(h, key, 'GET', '/v1/meetings')).status, 200);

    const revoked = await h.request('DELETE', `/v1/api-keys/${created.json.id}`);
    assert.equal(revoked.status, 204, revoked.text);
    const refused = await as(h, key, 'GET', '/v1/meetings');
    assert.equal(refused.status, 401);
    assert.equal(refused.json.error.code, 'auth.invalid_key');
    // Revoking it again is a 404: there is no active key by that id any more.
    assert.equal((await h.request('DELETE', `/v1/api-keys/${created.json.id}`)).status, 404);

    // The POST form answers with the revoked key as listed.
    const second = await h.request('POST', '/v1/api-keys');
    assert.equal(second.status, 201, second.text);
    assert.equal(second.json.name, 'api');
    assert.equal((await as(h, second.json.key, 'GET', '/v1/meetings')).status, 200);
    const viaPost = await h.request('POST', `/v1/api-keys/${second.json.id}/revoke`);
    assert.equal(viaPost.status, 200, viaPost.text);
    assert.equal(viaPost.json.status, 'revoked');
    assert.ok(viaPost.json.revokedAt);
    assert.equal(viaPost.json.key, undefined);
    assert.equal((await as(h, second.json.key, 'GET', '/v1/meetings')).status, 401);
  });

  void it('S9: `verbatim keys revoke` in another process stops a key at its next request; keys list and create --expires-in-days', async () => {
    const create = spawnVerbatim(
      ['keys', 'create', '--workspace', 'ops', '--label', 'deploy', '--expires-in-days', '30'],
      h.env(),
    );
    assert.equal(await create.exited, 0, create.output());
    const key = /API key \(shown once\): (\S+)/.exec(create.output())?.[1];
    const id = /key id ([0-9a-f-]{36})/.exec(create.output())?.[1];
    assert.ok(key && id, create.output());
    const row = await h.app.database.db
      .selectFrom('api_keys')
      .select('expires_at')
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    const days = (row.expires_at!.getTime() - Date.now()) / 86_400_000;
    assert.ok(days > 29.9 && days <= 30, `expires in ${days} days`);
    // A first request through the in-process API: the key works and its use is recorded.
    assert.equal((await as(h, key, 'GET', '/v1/meetings')).status, 200);

    const list = spawnVerbatim(['keys', 'list'], h.env());
    assert.equal(await list.exited, 0, list.output());
    const line = list
      .output()
      .split('\n')
      .find((l) => l.startsWith(id));
    assert.ok(line, list.output());
    assert.match(line, /ops\s+deploy\s+active\s+\d{4}-\d{2}-\d{2}T\S+Z\s+\d{4}-\d{2}-\d{2}T\S+Z\s+\d{4}-/);
    // The secret is everything after `vbt_<prefix>_`; base64url may hold `_` itself, so it is not
    // split on it (a fragment of two letters could appear in the list by chance).
    const secret = key.split('_').slice(2).join('_');
    assert.ok(secret.length >= 32, `the secret part of ${key.slice(0, 8)}…`);
    assert.ok(!list.output().includes(secret), 'no secret in the list');
    const hashes = await h.app.database.db.selectFrom('api_keys').select('key_hash').execute();
    for (const { key_hash } of hashes) assert.ok(!list.output().includes(key_hash), 'no hash in the list');

    const revoke = spawnVerbatim(['keys', 'revoke', id], h.env());
    assert.equal(await revoke.exited, 0, revoke.output());
    assert.match(revoke.output(), /revoked key/);
    // The API process never saw the revocation: it reads the key's row on every request.
    assert.equal((await as(h, key, 'GET', '/v1/meetings')).status, 401);

    const listed = spawnVerbatim(['keys', 'list', '--workspace', 'ops'], h.env());
    assert.equal(await listed.exited, 0, listed.output());
    assert.match(listed.output(), /deploy\s+revoked/);
    assert.ok(!listed.output().includes('test '), 'only the named workspace');
    const unknown = spawnVerbatim(['keys', 'revoke', '00000000-0000-4000-8000-000000000000'], h.env());
    assert.equal(await unknown.exited, 1);
    assert.match(unknown.output(), /no API key/);
    const bad = spawnVerbatim(['keys', 'create', '--expires-in-days', 'soon'], h.env());
    assert.equal(await bad.exited, 2);
    assert.match(bad.output(), /--expires-in-days must be a number/);
  });

  void it('S9: an expired key gets 401', async () => {
    const expiresAt = new Date(Date.now() + 3000);
    const created = await h.request('POST', '/v1/api-keys', {
      name: 'short',
      expiresAt: expiresAt.toISOString(),
    });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.json.expiresAt, expiresAt.toISOString());
    const key = created.json.key as string;
    assert.equal((await as(h, key, 'GET', '/v1/meetings')).status, 200, 'works before it expires');
    const refused = await waitFor(
      'the key to expire',
      async () => {
        const res = await as(h, key, 'GET', '/v1/meetings');
        return res.status === 401 ? res : null;
      },
      20_000,
    );
    assert.equal(refused.json.error.code, 'auth.invalid_key');
    assert.ok(Date.now() >= expiresAt.getTime() - 50, 'refused only once its time had come');
    const all = (await h.request('GET', '/v1/api-keys')).json.apiKeys as Array<{
      id: string;
      status: string;
    }>;
    const listed = all.find((k) => k.id === created.json.id)!;
    assert.equal(listed.status, 'expired');

    for (const [expires, why] of [
      [new Date(Date.now() - 60_000).toISOString(), /future/],
      ['2030-01-01', /ISO 8601 date-time with a zone/],
      ['next week', /ISO 8601/],
      [12345, /ISO 8601/],
    ] as const) {
      const res = await h.request('POST', '/v1/api-keys', { expiresAt: expires });
      assert.equal(res.status, 400, `${String(expires)}: ${res.text}`);
      assert.equal(res.json.error.code, 'api_key.expires_at');
      assert.match(res.json.error.message, why);
    }
    const unknownField = await h.request('POST', '/v1/api-keys', { owner: 'someone' });
    assert.equal(unknownField.status, 400);
    assert.match(unknownField.json.error.message, /unknown field owner/);
    const emptyName = await h.request('POST', '/v1/api-keys', { name: ' ' });
    assert.equal(emptyName.json.error.code, 'api_key.name');
  });

  void it('S9: a workspace lists and revokes only its own keys; no secret in the list', async () => {
    const other = await h.app.workspaces.createWorkspace('other');
    const theirs = await h.app.workspaces.createApiKey(other, 'theirs');
    const mine = await h.request('POST', '/v1/api-keys', { name: 'mine' });
    assert.equal(mine.status, 201);

    const list = await h.request('GET', '/v1/api-keys');
    assert.equal(list.status, 200);
    const keys = list.json.apiKeys as Array<Record<string, unknown>>;
    assert.ok(keys.length >= 2);
    assert.ok(
      keys.every((k) => k.workspaceId === h.workspaceId),
      'only this workspace’s keys',
    );
    assert.ok(!keys.some((k) => k.id === theirs.keyId));
    const listed = keys.find((k) => k.id === mine.json.id)!;
    assert.deepEqual(Object.keys(listed).sort(), [
      'createdAt',
      'expiresAt',
      'hint',
      'id',
      'lastUsedAt',
      'name',
      'revokedAt',
      'scopes',
      'status',
      'userId',
      'workspaceId',
    ]);
    const ownRow = keys.find((k) => k.name === 'test')!;
    assert.ok(ownRow.lastUsedAt, 'the key in use has a last-used time');
    const hashes = await h.app.database.db.selectFrom('api_keys').select('key_hash').execute();
    for (const secret of [h.apiKey, mine.json.key as string, theirs.apiKey]) {
      // The secret is base64url, which may itself hold '_': everything after the prefix.
      const secretPart = secret.split('_').slice(2).join('_');
      assert.ok(secretPart.length >= 32, `secret part of ${secretPart.length} characters`);
      assert.ok(!list.text.includes(secretPart), 'no secret part in the list');
    }
    for (const { key_hash } of hashes) assert.ok(!list.text.includes(key_hash), 'no hash in the list');

    // Another workspace's key: 404 by either route, and it keeps working.
    for (const [method, url] of [
      ['DELETE', `/v1/api-keys/${theirs.keyId}`],
      ['POST', `/v1/api-keys/${theirs.keyId}/revoke`],
    ] as const) {
      const res = await h.request(method, url);
      assert.equal(res.status, 404, res.text);
      assert.equal(res.json.error.code, 'api_key.not_found');
    }
    assert.equal((await h.request('DELETE', '/v1/api-keys/not-a-uuid')).status, 404);
    assert.equal((await as(h, theirs.apiKey, 'GET', '/v1/meetings')).status, 200);
    const theirList = await as(h, theirs.apiKey, 'GET', '/v1/api-keys');
    const theirIds = (theirList.json.apiKeys as Array<{ id: string }>).map((k) => k.id);
    assert.deepEqual(theirIds, [theirs.keyId]);

    // Their only key cannot be revoked through the API (409); once they have a second, it can.
    const last = await as(h, theirs.apiKey, 'DELETE', `/v1/api-keys/${theirs.keyId}`);
    assert.equal(last.status, 409, last.text);
    assert.equal(last.json.error.code, 'api_key.last_key');
    assert.equal((await as(h, theirs.apiKey, 'GET', '/v1/meetings')).status, 200);
    const spare = await as(h, theirs.apiKey, 'POST', '/v1/api-keys', { name: 'spare' });
    assert.equal(spare.status, 201);
    assert.equal((await as(h, theirs.apiKey, 'DELETE', `/v1/api-keys/${theirs.keyId}`)).status, 204);
    assert.equal((await as(h, theirs.apiKey, 'GET', '/v1/meetings')).status, 401, 'its own key, revoked');
    assert.equal((await as(h, spare.json.key, 'GET', '/v1/meetings')).status, 200);

    // Two revokes at once of a workspace's last two keys, each with the other key: one wins; the
    // other is refused as the last key (409), or finds its own key already revoked (401).
    const a = await as(h, spare.json.key, 'POST', '/v1/api-keys', { name: 'a' });
    const both = await Promise.all([
      as(h, a.json.key, 'DELETE', `/v1/api-keys/${spare.json.id}`),
      as(h, spare.json.key, 'DELETE', `/v1/api-keys/${a.json.id}`),
    ]);
    const statuses = both.map((r) => r.status).sort();
    assert.equal(statuses[0], 204, JSON.stringify(statuses));
    assert.ok(statuses[1] === 401 || statuses[1] === 409, JSON.stringify(statuses));
    const active = (await h.app.workspaces.listApiKeys(other)).filter((k) => k.status === 'active');
    assert.equal(active.length, 1);

    assert.equal((await h.request('GET', '/v1/api-keys', undefined, { authorization: '' })).status, 401);
    const doc = (await h.request('GET', '/openapi.json')).json;
    assert.ok(doc.paths['/v1/api-keys']?.get && doc.paths['/v1/api-keys']?.post);
    assert.ok(doc.paths['/v1/api-keys/{id}']?.delete && doc.paths['/v1/api-keys/{id}/revoke']?.post);
  });
});

void describe('metrics and assets (issue 13 scope 7)', () => {
  let h: Harness;
  before(async () => {
    h = await startHarness();
  });
  after(async () => {
    await h?.close();
  });

  void it('S9: /metrics without the token gets 401; with it, no workspace id in the output', async () => {
    const other = await h.app.workspaces.createWorkspace('other');
    const otherKey = await h.app.workspaces.createApiKey(other, 'other');
    const wav = speechWav('metrics');
    await uploadMeeting(h, wav);
    const second = await as(h, otherKey.apiKey, 'POST', '/v1/meetings', { source: 'upload', title: 'x' });
    assert.equal(second.status, 201);

    for (const headers of [
      {},
      { authorization: `Bearer ${METRICS_TOKEN.slice(0, -1)}` },
      { authorization: `Bearer ${METRICS_TOKEN}x` },
      { authorization: `Bearer ${h.apiKey}` },
      { authorization: METRICS_TOKEN },
      { authorization: `Basic ${Buffer.from(`x:${METRICS_TOKEN}`).toString('base64')}` },
    ]) {
      const res = await h.api.inject({ method: 'GET', url: '/metrics', headers });
      assert.equal(res.statusCode, 401, JSON.stringify(headers));
      assert.equal(res.json().error.code, 'metrics.invalid_token');
      assert.ok(!res.body.includes('verbatim_'), 'no figures without the token');
    }

    const res = await h.api.inject({ method: 'GET', url: '/metrics', headers: METRICS_AUTH });
    assert.equal(res.statusCode, 200, res.body);
    assert.match(res.body, /^verbatim_scrape_ok 1$/m);
    const total = Number(/^verbatim_stored_bytes (\d+)$/m.exec(res.body)?.[1]);
    assert.ok(total >= wav.length, res.body);
    assert.match(res.body, /^verbatim_stored_bytes_largest_workspace \d+$/m);
    assert.ok(!/workspace="/.test(res.body), 'no workspace label');
    const ids = await h.app.database.db.selectFrom('workspaces').select('id').execute();
    assert.ok(ids.length >= 2);
    for (const { id } of ids) assert.ok(!res.body.includes(id), `workspace ${id} in the metrics`);

    // The operator's own view, from the database, still names the workspaces.
    const status = spawnVerbatim(['status'], h.env());
    assert.equal(await status.exited, 0, status.output());
    assert.match(status.output(), new RegExp(`^${h.workspaceId}\\s+test\\s`, 'm'), status.output());
  });

  void it('S9: with VERBATIM_METRICS_TOKEN unset, /metrics is off and says which setting turns it on', async () => {
    const off = await startHarness({ env: { VERBATIM_METRICS_TOKEN: '' } });
    try {
      const res = await off.api.inject({ method: 'GET', url: '/metrics', headers: METRICS_AUTH });
      assert.equal(res.statusCode, 404);
      assert.equal(res.json().error.code, 'metrics.disabled');
      assert.match(res.json().error.message, /set VERBATIM_METRICS_TOKEN/);
      assert.equal((await off.api.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
    } finally {
      await off.close();
    }
    assert.throws(
      () => loadConfig({ ...FAST_ENV, VERBATIM_METRICS_TOKEN: 'short' }),
      (err: unknown) => err instanceof ConfigError && /at least 16 characters/.test(err.message),
    );
  });

  void it('S9: no source map is served', async () => {
    const root = buildWebApp();
    try {
      const files = fs.readdirSync(root, { recursive: true, encoding: 'utf8' });
      assert.ok(
        files.some((f) => f.endsWith('.js')),
        'the bundle was built',
      );
      assert.deepEqual(
        files.filter((f) => f.endsWith('.map')),
        [],
        'the build writes no source maps',
      );
      for (const f of files.filter((x) => x.endsWith('.js'))) {
        assert.ok(!fs.readFileSync(path.join(root, f), 'utf8').includes('sourceMappingURL'), f);
      }
      // A map left behind by an older build is refused all the same, however its name is spelled.
      const js = files.find((f) => f.startsWith(`assets${path.sep}`) && f.endsWith('.js'))!;
      fs.writeFileSync(path.join(root, `${js}.map`), '{"version":3,"sources":["src/secret.ts"]}');
      fs.writeFileSync(path.join(root, 'app.MAP'), '{"version":3}');
      const api = buildApi({
        deps: h.app.deps,
        workspaces: h.app.workspaces,
        people: h.app.people,
        log: h.app.log,
        webRoot: root,
      });
      try {
        const served = await api.inject({ method: 'GET', url: `/${js.split(path.sep).join('/')}` });
        assert.equal(served.statusCode, 200, 'the script itself is served');
        const base = `/${js.split(path.sep).join('/')}`;
        for (const url of [
          `${base}.map`,
          `${base}.m%61p`,
          `${base}%2Emap`,
          `${base}.m%2561p`,
          `${base}.map?x=1`,
          '/app.MAP',
        ]) {
          const res = await api.inject({ method: 'GET', url });
          assert.equal(res.statusCode, 404, url);
          assert.ok(!res.body.includes('secret.ts'), url);
        }
      } finally {
        await api.close();
      }
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
