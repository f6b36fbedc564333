import fs from 'node:fs';
import path from 'node:path';
import { buildAppApi, openApp, startAppWorker } from '../app.ts';
import type { Config } from '../config.ts';
import type { Logger } from '../log.ts';

const TYPES: Record<string, string> = {
  '.wav': 'audio/wav',
  '.mp3': 'audio/mpeg',
  '.m4a': 'audio/mp4',
  '.mp4': 'audio/mp4',
  '.webm': 'audio/webm',
  '.ogg': 'audio/ogg',
  '.opus': 'audio/ogg',
  '.flac': 'audio/flac',
};

interface MeetingView {
  id: string;
  status: string;
  windows: { total: number; done: number; inFlight: number; exhausted: number; missing: number };
  minutes: {
    status: string;
    reason: { code: string; message: string } | null;
    content: MinutesContent | null;
  };
  failure: { code: string; message: string } | null;
}
interface MinutesContent {
  writer: string;
  summary: string;
  decisions: string[];
  actionItems: string[];
  note: string | null;
}

/**
 * One-shot use through the same API path as any client: against VERBATIM_URL if set, otherwise an
 * in-process api + worker on the embedded (or DATABASE_URL) database.
 */
export async function transcribeFile(config: Config, log: Logger, file: string): Promise<number> {
  const data = fs.readFileSync(file);
  const contentType = TYPES[path.extname(file).toLowerCase()] ?? 'application/octet-stream';
  if (config.client.url) {
    return runAgainst(config.client.url, config.client.apiKey, file, data, contentType);
  }
  const quiet = log.child({}, { level: 'warn' });
  const app = await openApp(config, { logger: quiet });
  const worker = await startAppWorker(app);
  const api = buildAppApi(app);
  try {
    await api.listen({ host: '127.0.0.1', port: 0 });
    const address = api.server.address();
    if (!address || typeof address !== 'object') throw new Error('api did not start');
    const workspaceId = await app.workspaces.createWorkspace('cli');
    const key = await app.workspaces.createApiKey(workspaceId, 'transcribe');
    return await runAgainst(`http://127.0.0.1:${address.port}`, key.apiKey, file, data, contentType);
  } finally {
    await api.close();
    await worker.stop(5000);
    await app.close();
  }
}

async function runAgainst(
  baseUrl: string,
  apiKey: string,
  file: string,
  data: Buffer,
  contentType: string,
): Promise<number> {
  const call = async <T>(
    method: string,
    route: string,
    body?: Buffer | object,
    type?: string,
  ): Promise<T> => {
    const res = await fetch(`${baseUrl}${route}`, {
      method,
      headers: {
        authorization: `Bearer ${apiKey}`,
        ...(body ? { 'content-type': type ?? 'application/json' } : {}),
      },
      body: body === undefined ? undefined : Buffer.isBuffer(body) ? body : JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${text}`);
    return (res.headers.get('content-type')?.includes('json') ? JSON.parse(text) : text) as T;
  };
  const created = await call<MeetingView>('POST', '/v1/meetings', {
    source: 'upload',
    title: path.basename(file),
  });
  await call('PUT', `/v1/meetings/${created.id}/recording`, data, contentType);
  let meeting = created;
  const bar = process.stderr.isTTY;
  for (;;) {
    meeting = await call<MeetingView>('GET', `/v1/meetings/${created.id}`);
    const { total, done, exhausted, missing } = meeting.windows;
    const settled = done + exhausted + missing;
    const width = 30;
    const filled = total ? Math.round((settled / total) * width) : 0;
    const line = `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${settled}/${total || '?'} windows  ${meeting.status}`;
    process.stderr.write(bar ? `\r${line}` : `${line}\n`);
    if (meeting.status === 'complete' || meeting.status === 'failed') break;
    await new Promise((r) => setTimeout(r, bar ? 250 : 1000));
  }
  if (bar) process.stderr.write('\n');
  if (meeting.status === 'failed') {
    process.stderr.write(`meeting failed: ${meeting.failure?.message ?? 'unknown reason'}\n`);
    return 1;
  }
  const transcript = await call<string>('GET', `/v1/meetings/${created.id}/transcript?format=txt`);
  process.stdout.write(`# Transcript\n${transcript}\n`);
  const minutes = meeting.minutes.content;
  if (minutes) {
    process.stdout.write(
      `\n# Minutes (${minutes.writer})\n${minutes.note ? `${minutes.note}\n` : ''}\n${minutes.summary}\n`,
    );
    if (minutes.decisions.length)
      process.stdout.write(`\nDecisions:\n${minutes.decisions.map((d) => `- ${d}`).join('\n')}\n`);
    if (minutes.actionItems.length) {
      process.stdout.write(`\nAction items:\n${minutes.actionItems.map((d) => `- ${d}`).join('\n')}\n`);
    }
  } else {
    process.stdout.write(`\n# Minutes\nnone: ${meeting.minutes.reason?.message ?? meeting.minutes.status}\n`);
  }
  return 0;
}
