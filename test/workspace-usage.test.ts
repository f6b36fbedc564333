import assert from 'node:assert/strict';
import { it } from 'node:test';
import { sql } from 'kysely';
import {
  SPEECH,
  spawnVerbatim,
  speechWav,
  startHarness,
  uploadMeeting,
  waitForMeeting,
} from './support/harness.ts';

void it('F7: `verbatim status`, `verbatim workspaces` and the operator page show each workspace’s stored bytes, queued windows, running jobs and hours this month; a monthly cap holds new meetings and uploads', async () => {
  const h = await startHarness();
  try {
    const other = await h.app.workspaces.createWorkspace('idle team');
    h.spawnWorker();
    const id = await uploadMeeting(h, speechWav(SPEECH));
    await waitForMeeting(h, id);
    const { rows } = await sql<{ ms: number }>`select sum(end_ms - start_ms)::int as ms
        from windows where meeting_id = ${id}::uuid and transcribed_at is not null`.execute(h.db.owner());
    const hours = (rows[0]?.ms ?? 0) / 3_600_000;
    assert.ok(hours > 0);

    const overview = await h.request('GET', '/v1/operator/overview');
    assert.equal(overview.status, 200, overview.text);
    const usage = overview.json.usage;
    assert.equal(usage.workspaceId, h.workspaceId);
    assert.equal(usage.weight, 1);
    assert.equal(usage.queuedWindows, 0);
    assert.equal(usage.storedBytes, overview.json.storedBytes, 'what the quota counts');
    assert.ok(
      Math.abs(usage.hoursThisMonth - hours) < 1e-6,
      `hours this month ${usage.hoursThisMonth} ≈ ${hours}`,
    );

    const status = spawnVerbatim(['status'], h.env());
    assert.equal(await status.exited, 0, status.output());
    const line = status
      .output()
      .split('\n')
      .find((l) => l.startsWith(h.workspaceId));
    assert.ok(line, `status has a line for the workspace:\n${status.output()}`);
    assert.match(line, new RegExp(`\\s${hours.toFixed(2)}\\s+none\\s+0$`));
    assert.ok(
      status
        .output()
        .split('\n')
        .some((l) => l.startsWith(other) && /\s0\s+0\s+0\s+0\s+none\s+0\.00\s+none\s+0$/.test(l)),
      'the idle workspace has its line, all zero',
    );

    const weight = spawnVerbatim(['workspaces', 'weight', other, '2.5'], h.env());
    assert.equal(await weight.exited, 0, weight.output());
    const list = spawnVerbatim(['workspaces'], h.env());
    assert.equal(await list.exited, 0, list.output());
    assert.match(
      list
        .output()
        .split('\n')
        .find((l) => l.startsWith(other)) ?? '',
      /idle team\s+2\.5\s/,
    );

    const bad = spawnVerbatim(['workspaces', 'weight', other, '1000'], h.env());
    assert.equal(await bad.exited, 2, bad.output());
    assert.match(bad.output(), /N from 0\.1 to 100/);

    // F5: a running cap is set, shown and lifted (test/fair-claiming.test.ts proves it holds).
    const runningCap = spawnVerbatim(['workspaces', 'running-cap', h.workspaceId, '3'], h.env());
    assert.equal(await runningCap.exited, 0, runningCap.output());
    assert.equal((await h.request('GET', '/v1/operator/overview')).json.usage.maxRunningJobs, 3);
    const badCap = spawnVerbatim(['workspaces', 'running-cap', h.workspaceId, '0'], h.env());
    assert.equal(await badCap.exited, 2, badCap.output());
    assert.match(badCap.output(), /N batch jobs at once, 1 or more/);
    const uncapped = spawnVerbatim(['workspaces', 'running-cap', h.workspaceId, 'none'], h.env());
    assert.equal(await uncapped.exited, 0, uncapped.output());
    assert.equal((await h.request('GET', '/v1/operator/overview')).json.usage.maxRunningJobs, null);

    // F7: a monthly cap below what it transcribed: new meetings and uploads wait for the month to
    // turn; another workspace goes on; lifting the cap lets them start again.
    const waiting = await h.request('POST', '/v1/meetings', {
      source: 'upload',
      title: 'made before the cap',
    });
    assert.equal(waiting.status, 201, waiting.text);
    const capped = spawnVerbatim(['workspaces', 'hours-cap', h.workspaceId, String(hours / 2)], h.env());
    assert.equal(await capped.exited, 0, capped.output());
    const refused = await h.request('POST', '/v1/meetings', { source: 'live', title: 'over the cap' });
    assert.equal(refused.status, 429, refused.text);
    assert.equal(refused.json.error.code, 'quota.hours_exceeded');
    assert.match(
      refused.json.error.message,
      /its cap of .* verbatim workspaces hours-cap.* can start on \d{4}-\d{2}-01/,
    );
    assert.ok(Number(refused.headers['retry-after']) >= 1, 'Retry-After until the month turns');
    const upload = await h.request('PUT', `/v1/meetings/${waiting.json.id}/recording`, speechWav(SPEECH), {
      'content-type': 'audio/wav',
    });
    assert.equal(upload.status, 429, upload.text);
    assert.equal(upload.json.error.code, 'quota.hours_exceeded');
    assert.equal((await h.request('GET', `/v1/meetings/${waiting.json.id}`)).json.status, 'created');
    assert.equal((await h.request('GET', '/v1/operator/overview')).json.usage.monthlyHoursCap, hours / 2);
    const { apiKey: otherKey } = await h.app.workspaces.createApiKey(other, 'idle');
    const theirs = await h.request(
      'POST',
      '/v1/meetings',
      { source: 'upload', title: 'theirs' },
      { authorization: `Bearer ${otherKey}` },
    );
    assert.equal(theirs.status, 201, theirs.text);
    const lifted = spawnVerbatim(['workspaces', 'hours-cap', h.workspaceId, 'none'], h.env());
    assert.equal(await lifted.exited, 0, lifted.output());
    const again = await h.request('POST', '/v1/meetings', { source: 'live', title: 'cap lifted' });
    assert.equal(again.status, 201, again.text);
  } finally {
    await h.close();
  }
});

void it('F5: a workspace’s weight spaces its rounds: weight 2 queues two jobs per round of the others', async () => {
  const h = await startHarness();
  try {
    await sql`update workspaces set fair_weight = 2 where id = ${h.workspaceId}::uuid`.execute(h.db.owner());
    // No worker: the split jobs wait, each in its round of the intake queue.
    for (const n of [1, 2, 3]) await uploadMeeting(h, speechWav('hello there'), `upload ${n}`);
    const { rows } = await sql<{ fair_round: number }>`select fair_round from jobs
        where workspace_id = ${h.workspaceId}::uuid and kind = 'split-recording' order by created_at`.execute(
      h.db.owner(),
    );
    assert.deepEqual(
      rows.map((r) => r.fair_round),
      [0, 0.5, 1],
    );
  } finally {
    await h.close();
  }
});
