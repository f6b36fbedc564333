import assert from 'node:assert/strict';
import { it } from 'node:test';
import { sql } from 'kysely';
import { markedChunk, startChunkRecognizer, type ChunkRecognizer } from './support/chunk-recognizer.ts';
import { silenceFile, startHarness, waitFor, type Harness } from './support/harness.ts';

// F5: due work is claimed round-robin across workspaces, live windows before batch ones. One
// transcription slot, and a recogniser at the HTTP boundary that holds the first window it is
// sent: while it is held the rest of the backlog waits in graphile-worker's queue, and the order
// in which they are claimed once it is let go is the order under test.

async function world(slots = 1): Promise<{ h: Harness; recognizer: ChunkRecognizer }> {
  const recognizer = await startChunkRecognizer();
  const h = await startHarness({
    env: {
      VERBATIM_ASR: 'whisper',
      VERBATIM_WHISPER_URL: recognizer.url,
      VERBATIM_TRANSCRIPTION_CONCURRENCY: String(slots),
      VERBATIM_GAP_PATIENCE_SECONDS: '0',
    },
  });
  return { h, recognizer };
}

/** A workspace's upload of `seconds` of silence, accepted (its split is queued). */
async function upload(h: Harness, key: string, seconds: number, title: string): Promise<string> {
  const auth = { authorization: `Bearer ${key}` };
  const created = await h.request('POST', '/v1/meetings', { source: 'upload', title }, auth);
  assert.equal(created.status, 201, created.text);
  const id = created.json.id as string;
  const flac = silenceFile(`${title}.flac`, seconds, ['-c:a', 'flac']);
  const put = await h.request('PUT', `/v1/meetings/${id}/recording`, flac, {
    ...auth,
    'content-type': 'audio/flac',
  });
  assert.equal(put.status, 202, put.text);
  return id;
}

/** A workspace's upload whose split has cut every window, with the one recogniser slot held. */
async function backlog(h: Harness, key: string, seconds: number, title: string): Promise<string> {
  const id = await upload(h, key, seconds, title);
  await waitFor(`${title}: every window cut`, async () => {
    const row = await h.app.database.db
      .selectFrom('meetings')
      .select('windows_cut_at')
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    return row.windows_cut_at !== null;
  });
  return id;
}

/** The transcription attempts started since `since`, oldest first, with their job's meeting. */
async function claimsSince(h: Harness, since: Date): Promise<Array<{ meeting: string; kind: string }>> {
  const rows = await h.app.database.db
    .selectFrom('job_attempts')
    .innerJoin('jobs', 'jobs.id', 'job_attempts.job_id')
    .select(['jobs.meeting_id as meeting', 'jobs.kind as kind'])
    .where('jobs.queue', '=', 'transcription')
    .where('job_attempts.started_at', '>', since)
    .orderBy('job_attempts.started_at')
    .orderBy('job_attempts.id')
    .execute();
  return rows.map((r) => ({ meeting: String(r.meeting), kind: r.kind }));
}

async function pendingWindows(h: Harness, meetingId: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from jobs
      where meeting_id = ${meetingId}::uuid and kind = 'transcribe-window' and status = 'pending'`.execute(
    h.app.database.db,
  );
  return rows[0]?.n ?? 0;
}

void it('F5: with one workspace holding hundreds of due windows, another workspace’s next window is claimed within one round', async () => {
  const { h, recognizer } = await world();
  try {
    recognizer.hold();
    h.spawnWorker();
    // The noisy workspace: fifteen minutes of audio, three hundred windows of three seconds.
    const noisy = await backlog(h, h.apiKey, 900, 'noisy');
    await waitFor('the noisy workspace’s first window to reach the recogniser', () =>
      Promise.resolve(recognizer.calls() >= 1),
    );
    const queued = await pendingWindows(h, noisy);
    assert.ok(queued >= 250, `the noisy workspace holds hundreds of due windows (${queued})`);

    const quietWorkspace = await h.app.workspaces.createWorkspace('quiet');
    const { apiKey: quietKey } = await h.app.workspaces.createApiKey(quietWorkspace, 'quiet');
    const quiet = await backlog(h, quietKey, 6, 'quiet');
    const since = new Date();
    recognizer.release();
    await waitFor('the quiet meeting to complete', async () => {
      const row = await h.app.database.db
        .selectFrom('meetings')
        .select('status')
        .where('id', '=', quiet)
        .executeTakeFirstOrThrow();
      return row.status === 'complete';
    });
    const claims = await claimsSince(h, since);
    const firstQuiet = claims.findIndex((c) => c.meeting === quiet);
    assert.ok(firstQuiet >= 0, 'the quiet workspace’s window was claimed');
    assert.ok(
      firstQuiet <= 1,
      `the quiet window was claimed within one round (after ${firstQuiet} of the noisy workspace’s)`,
    );
    // Both of its windows came before the noisy backlog was through: it did not wait behind it.
    const lastQuiet = claims.map((c) => c.meeting).lastIndexOf(quiet);
    assert.ok(lastQuiet <= 3, `the quiet workspace’s windows alternated with the noisy ones (${lastQuiet})`);
    assert.ok((await pendingWindows(h, noisy)) > 200, 'the noisy backlog was still there when it was served');
  } finally {
    await h.close();
    await recognizer.close();
  }
});

void it('F5: a live window is claimed before a batch window of the same workspace', async () => {
  const { h, recognizer } = await world();
  try {
    recognizer.hold();
    h.spawnWorker();
    const batch = await backlog(h, h.apiKey, 120, 'batch');
    await waitFor('the batch’s first window to reach the recogniser', () =>
      Promise.resolve(recognizer.calls() >= 1),
    );
    assert.ok((await pendingWindows(h, batch)) >= 30, 'the batch windows wait');

    const created = await h.request('POST', '/v1/meetings', { source: 'live', title: 'standup' });
    assert.equal(created.status, 201, created.text);
    const live = created.json.id as string;
    for (const seq of [0, 1]) {
      const put = await h.request('PUT', `/v1/meetings/${live}/chunks/${seq}`, markedChunk(seq), {
        'content-type': 'audio/wav',
      });
      assert.ok(put.status === 201 || put.status === 200, put.text);
    }
    await waitFor(
      'the live meeting’s first window to be due',
      async () => (await pendingWindows(h, live)) >= 1,
    );
    const since = new Date();
    recognizer.release();
    await waitFor('the live window to be claimed', async () =>
      (await claimsSince(h, since)).some((c) => c.meeting === live),
    );
    const claims = await claimsSince(h, since);
    assert.equal(claims[0]?.meeting, live, 'the first window claimed after the slot freed was the live one');
  } finally {
    await h.close();
    await recognizer.close();
  }
});

async function running(h: Harness, meetingId: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from jobs
      where meeting_id = ${meetingId}::uuid and queue = 'transcription' and status = 'running'`.execute(
    h.app.database.db,
  );
  return rows[0]?.n ?? 0;
}

void it('F5: a workspace’s running cap holds its batch jobs to the cap, and another workspace takes the free slots', async () => {
  const { h, recognizer } = await world(4);
  try {
    assert.ok(await h.app.workspaces.setMaxRunningJobs(h.workspaceId, 1));
    recognizer.hold();
    h.spawnWorker();
    // The capped workspace: a minute of audio, twenty windows, on four transcription slots.
    const noisy = await backlog(h, h.apiKey, 60, 'capped');
    await waitFor('the capped workspace’s first window to reach the recogniser', () =>
      Promise.resolve(recognizer.calls() >= 1),
    );
    const quietWorkspace = await h.app.workspaces.createWorkspace('quiet');
    const { apiKey: quietKey } = await h.app.workspaces.createApiKey(quietWorkspace, 'quiet');
    const quiet = await backlog(h, quietKey, 6, 'quiet');
    // Without the cap the capped workspace would hold all four slots and the quiet windows would wait.
    await waitFor(
      'both quiet windows to reach the recogniser beside the capped one',
      async () => (await running(h, quiet)) === 2 && recognizer.calls() >= 3,
    );
    assert.equal(await running(h, noisy), 1, 'the capped workspace runs one window, its cap');
    assert.ok((await pendingWindows(h, noisy)) >= 15, 'the rest of its windows wait their turn');
    recognizer.release();
    for (const id of [quiet, noisy]) {
      await waitFor(`meeting ${id} to complete`, async () => {
        const row = await h.app.database.db
          .selectFrom('meetings')
          .select('status')
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        return row.status === 'complete';
      });
    }
    // Across the whole run, no two of the capped workspace's batch attempts overlapped.
    const attempts = await h.app.database.db
      .selectFrom('job_attempts')
      .innerJoin('jobs', 'jobs.id', 'job_attempts.job_id')
      .select(['job_attempts.started_at as start', 'job_attempts.ended_at as end'])
      .where('jobs.workspace_id', '=', h.workspaceId)
      .where('jobs.queue', 'in', ['intake', 'transcription'])
      .orderBy('job_attempts.started_at')
      .execute();
    assert.ok(attempts.length >= 21, `the split and every window ran (${attempts.length} attempts)`);
    for (let i = 1; i < attempts.length; i++) {
      const prev = attempts[i - 1]!;
      const next = attempts[i]!;
      assert.ok(
        prev.end !== null && prev.end <= next.start,
        `attempt ${i} started before attempt ${i - 1} ended`,
      );
    }
  } finally {
    await h.close();
    await recognizer.close();
  }
});

void it('F2: a workspace’s splits run at most its split limit at once across the intake slots, and another workspace’s split takes a free slot meanwhile', async () => {
  const { h, recognizer } = await world(1);
  try {
    const quietWorkspace = await h.app.workspaces.createWorkspace('quiet');
    const { apiKey: quietKey } = await h.app.workspaces.createApiKey(quietWorkspace, 'quiet');
    // Every split is queued before a worker runs, so without the limit three intake slots would
    // start three of the busy workspace's at once.
    const busy: string[] = [];
    for (let i = 0; i < 4; i++) busy.push(await upload(h, h.apiKey, 600, `busy-${i}`));
    const quiet = await upload(h, quietKey, 600, 'quiet');
    h.spawnWorker({ VERBATIM_INTAKE_CONCURRENCY: '3', VERBATIM_SPLITS_PER_WORKSPACE: '1' });
    for (const id of [...busy, quiet]) {
      await waitFor(`meeting ${id}: every window cut`, async () => {
        const row = await h.app.database.db
          .selectFrom('meetings')
          .select('windows_cut_at')
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        return row.windows_cut_at !== null;
      });
    }
    const splits = await h.app.database.db
      .selectFrom('job_attempts')
      .innerJoin('jobs', 'jobs.id', 'job_attempts.job_id')
      .select([
        'jobs.meeting_id as meeting',
        'job_attempts.started_at as start',
        'job_attempts.ended_at as end',
      ])
      .where('jobs.kind', '=', 'split-recording')
      .orderBy('job_attempts.started_at')
      .execute();
    const ofBusy = splits.filter((a) => busy.includes(String(a.meeting)));
    assert.equal(ofBusy.length, 4, 'each of the busy workspace’s splits ran once');
    for (let i = 1; i < ofBusy.length; i++) {
      const prev = ofBusy[i - 1]!;
      assert.ok(
        prev.end !== null && prev.end <= ofBusy[i]!.start,
        `the busy workspace’s split ${i} started before split ${i - 1} ended`,
      );
    }
    const quietSplit = splits.find((a) => String(a.meeting) === quiet);
    assert.ok(quietSplit, 'the quiet workspace’s split ran');
    assert.ok(
      quietSplit.start < ofBusy[1]!.start,
      'the quiet workspace’s split started beside the busy one’s first, not after its backlog',
    );
  } finally {
    await h.close();
    await recognizer.close();
  }
});
