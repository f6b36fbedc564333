/**
 * F5's noisy neighbour for the benchmarks: a workspace that uploads `hours` of audio (silent FLACs
 * of five hours at most, which its split turns into windows) and whose every window is cut and
 * queued before the measurement beside it starts.
 */
import type { App } from '../src/app.ts';
import { silenceFile } from '../test/support/harness.ts';

export interface NoisyBacklog {
  workspaceId: string;
  windows: number;
  /** Its windows still waiting now. */
  waiting(): Promise<number>;
}

export async function queueNoisyBacklog(app: App, base: string, hours: number): Promise<NoisyBacklog> {
  const workspaceId = await app.workspaces.createWorkspace('noisy');
  const { apiKey } = await app.workspaces.createApiKey(workspaceId, 'noisy');
  const call = async (method: string, url: string, body: Buffer | object, type = 'application/json') => {
    const res = await fetch(`${base}${url}`, {
      method,
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': type },
      body: Buffer.isBuffer(body) ? body : JSON.stringify(body),
    });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${text}`);
    return text ? (JSON.parse(text) as Record<string, unknown>) : {};
  };
  const ids: string[] = [];
  for (let left = hours; left > 0; left -= 5) {
    const seconds = Math.round(Math.min(5, left) * 3600);
    const flac = silenceFile(`noisy-${left}.flac`, seconds, ['-c:a', 'flac']);
    const { id } = (await call('POST', '/v1/meetings', { source: 'upload', title: `noisy ${left}` })) as {
      id: string;
    };
    await call('PUT', `/v1/meetings/${id}/recording`, flac, 'audio/flac');
    ids.push(id);
  }
  for (const id of ids) {
    const deadline = Date.now() + 3_600_000;
    for (;;) {
      const row = await app.database.db
        .selectFrom('meetings')
        .select(['status', 'windows_cut_at'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      if (row.windows_cut_at !== null) break;
      if (row.status === 'failed') throw new Error(`noisy meeting ${id} failed`);
      if (Date.now() > deadline) throw new Error('timed out waiting for the noisy splits');
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  const windows = Number(
    (
      await app.database.db
        .selectFrom('windows')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('meeting_id', 'in', ids)
        .executeTakeFirstOrThrow()
    ).n,
  );
  const waiting = async () =>
    Number(
      (
        await app.database.db
          .selectFrom('jobs')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .where('workspace_id', '=', workspaceId)
          .where('kind', '=', 'transcribe-window')
          .where('status', '=', 'pending')
          .executeTakeFirstOrThrow()
      ).n,
    );
  return { workspaceId, windows, waiting };
}
