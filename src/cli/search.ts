import type { App } from '../app.ts';
import type { Config } from '../config.ts';
import { readAsTenant } from '../db/tenant.ts';
import { SEARCH_QUERY_MAX, type Highlighted } from '../domain/search.ts';
import { clock } from '../domain/transcript-format.ts';
import { UsageError } from './usage-error.ts';

const out = (line = '') => process.stdout.write(`${line}\n`);

interface PrintedResult {
  meeting: { id: string; title: string; createdAt: string | Date };
  hitCount: number;
  hits: Array<{ kind: string; startMs: number | null } & Highlighted>;
}

/**
 * O4 from the command line: `verbatim search "words"` prints, per meeting, its title, date and id
 * and its best hits with their time and the matched words in «». Against VERBATIM_URL with
 * VERBATIM_API_KEY it asks that API; otherwise it reads the database as the workspace named by
 * --workspace (the only one when there is one).
 */
export async function searchCommand(
  config: Config,
  withApp: (fn: (app: App) => Promise<number>) => Promise<number>,
  query: string,
  workspace: string | undefined,
  limit = 10,
): Promise<number> {
  if (query.trim() === '' || query.length > SEARCH_QUERY_MAX) {
    throw new UsageError(`search needs the words to look for (at most ${SEARCH_QUERY_MAX} characters)`);
  }
  if (config.client.url) {
    const url = new URL('/v1/search', config.client.url);
    url.searchParams.set('q', query);
    url.searchParams.set('limit', String(limit));
    const res = await fetch(url, { headers: { authorization: `Bearer ${config.client.apiKey}` } });
    const body = (await res.json()) as {
      results?: Array<{
        meeting: PrintedResult['meeting'];
        hitCount: number;
        hits: Array<{
          kind: string;
          startMs: number | null;
          snippet: string;
          highlights: Highlighted['highlights'];
        }>;
      }>;
      error?: { message: string };
    };
    if (!res.ok) {
      process.stderr.write(`search failed: ${res.status} ${body.error?.message ?? ''}\n`);
      return 1;
    }
    return print(
      (body.results ?? []).map((r) => ({
        ...r,
        hits: r.hits.map((h) => ({
          kind: h.kind,
          startMs: h.startMs,
          text: h.snippet,
          highlights: h.highlights,
        })),
      })),
    );
  }
  return withApp(async (app) => {
    const workspaces = await app.workspaces.listWorkspaces();
    const chosen =
      workspace === undefined
        ? workspaces.length === 1
          ? workspaces[0]
          : undefined
        : workspaces.find((w) => w.name === workspace || w.id === workspace);
    if (!chosen) {
      throw new UsageError(
        workspace === undefined
          ? `there are ${workspaces.length} workspaces: name one with --workspace (${workspaces.map((w) => w.name).join(', ')})`
          : `no workspace named ${workspace}`,
      );
    }
    const page = await readAsTenant(app.database.db, chosen.id, (trx) =>
      app.deps.search.search(trx, chosen.id, query, {}, { offset: 0, limit }),
    );
    return print(
      page.results.map((r) => ({
        ...r,
        hits: r.hits.map((h) => ({
          kind: h.kind,
          startMs: h.startMs,
          text: h.text,
          highlights: h.highlights,
        })),
      })),
    );
  });
}

function print(results: PrintedResult[]): number {
  if (results.length === 0) {
    out('no meeting matches');
    return 0;
  }
  for (const r of results) {
    const date = new Date(r.meeting.createdAt).toISOString().replace('T', ' ').slice(0, 16);
    out(`${r.meeting.title}  ${date}  ${r.meeting.id}  (${r.hitCount} ${r.hitCount === 1 ? 'hit' : 'hits'})`);
    for (const h of r.hits) {
      const at = h.startMs === null ? 'minutes' : clock(h.startMs);
      out(`  ${at.padStart(8)}  ${marked(h)}`);
    }
  }
  return 0;
}

function marked({ text, highlights }: Highlighted): string {
  let line = '';
  let at = 0;
  for (const h of highlights) {
    line += `${text.slice(at, h.start)}«${text.slice(h.start, h.end)}»`;
    at = h.end;
  }
  return line + text.slice(at);
}
