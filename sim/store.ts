/**
 * The store as it physically is (V4, V7, V11): a watcher on the local blob store's directory that
 * notes when each object appears and when it leaves, and what audio it holds, read from its bytes
 * — never from the service's rows. An object is known by its content: a WAV of exact marks names
 * its meeting and marks in every sample (sim/marks.ts); any other file (an encoded upload) is known
 * when its bytes are bytes a client sent (by SHA-256), or, when it left before it could be read, by
 * the content hash in its name (B1 names every object after the SHA-256 of its bytes).
 */
import fs from 'node:fs';
import path from 'node:path';
import { TEMP_PREFIX } from '../src/adapters/local-blob-store.ts';
import type { SentAudio } from './clients.ts';
import { sha256 } from './clients.ts';
import { readAudio, samplesOfWav } from './marks.ts';

export interface StoredObject {
  key: string;
  bytes: number;
  seenAt: number;
  /** When it left the store; null while it is still there. */
  goneAt: number | null;
  /**
   * What it holds: samples per `<number>/<mark>` (exact marks), tones of some lossy upload, or
   * nothing readable (an encoded file no client sent, or one gone before it was read).
   */
  marks: Map<string, number>;
  content: 'exact' | 'sent' | 'tones' | 'unknown';
}

export class StoreWatcher {
  readonly objects = new Map<string, StoredObject>();
  private watcher: fs.FSWatcher | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly root: string,
    /** What the clients sent, by SHA-256 (read when a file is seen, so later sends count too). */
    private readonly sent: Map<string, SentAudio>,
  ) {}

  start(): void {
    fs.mkdirSync(this.root, { recursive: true });
    // inotify for the moment of each change, and a scan every second for what an event missed
    // (a directory made between two events, an overflowed queue).
    this.watcher = fs.watch(this.root, { recursive: true }, (_event, name) => {
      if (name) this.look(String(name));
    });
    this.watcher.on('error', () => undefined);
    this.timer = setInterval(() => this.scan(), 1000);
  }

  stop(): void {
    this.watcher?.close();
    if (this.timer) clearInterval(this.timer);
    this.scan();
  }

  /** Bytes of the objects in the store now (temporaries of writes in flight excluded). */
  bytesNow(): number {
    return this.files().reduce((n, f) => n + (statSize(path.join(this.root, f)) ?? 0), 0);
  }

  /** Objects in the store now. */
  present(): StoredObject[] {
    this.scan();
    return [...this.objects.values()].filter((o) => o.goneAt === null);
  }

  private scan(): void {
    const now = new Set(this.files());
    for (const key of now) this.look(key);
    for (const o of this.objects.values()) if (o.goneAt === null && !now.has(o.key)) o.goneAt = Date.now();
  }

  private files(dir = '', out: string[] = []): string[] {
    let entries: fs.Dirent[] = [];
    try {
      entries = fs.readdirSync(path.join(this.root, dir), { withFileTypes: true });
    } catch {
      return out;
    }
    for (const e of entries) {
      const rel = dir ? `${dir}/${e.name}` : e.name;
      if (e.isDirectory()) this.files(rel, out);
      else if (!e.name.startsWith(TEMP_PREFIX)) out.push(rel);
    }
    return out;
  }

  private look(key: string): void {
    if (path.basename(key).startsWith(TEMP_PREFIX)) return;
    const full = path.join(this.root, key);
    const known = this.objects.get(key);
    let bytes: Buffer | null = null;
    try {
      if (fs.statSync(full).isDirectory()) return;
      if (!known || known.goneAt !== null) bytes = fs.readFileSync(full);
    } catch {
      // gone (or never a file)
      if (known && known.goneAt === null) known.goneAt = Date.now();
      else if (!known)
        this.objects.set(key, { ...this.read(key, null), seenAt: Date.now(), goneAt: Date.now() });
      return;
    }
    if (bytes) this.objects.set(key, { ...this.read(key, bytes), seenAt: Date.now(), goneAt: null });
  }

  /** What an object holds, from its bytes (or, when it left unread, the content hash in its key). */
  private read(key: string, bytes: Buffer | null): Pick<StoredObject, 'key' | 'bytes' | 'marks' | 'content'> {
    const hash = bytes ? sha256(bytes) : /-([0-9a-f]{64})-/.exec(key)?.[1];
    const sent = hash ? this.sent.get(hash) : undefined;
    const marks = new Map<string, number>();
    if (sent && !sent.lossy) {
      for (const [mark, n] of sent.marks) marks.set(`${sent.number}/${mark}`, n);
      return { key, bytes: bytes?.length ?? 0, marks, content: 'sent' };
    }
    const samples = bytes ? samplesOfWav(bytes) : null;
    if (samples) {
      let tones = false;
      for (const run of readAudio(samples)) {
        if (run.kind === 'exact') {
          const k = `${run.meeting}/${run.mark}`;
          marks.set(k, (marks.get(k) ?? 0) + run.samples);
        } else tones = true;
      }
      if (marks.size > 0) return { key, bytes: bytes!.length, marks, content: 'exact' };
      if (tones) return { key, bytes: bytes!.length, marks, content: 'tones' };
    }
    return { key, bytes: bytes?.length ?? 0, marks, content: sent ? 'sent' : 'unknown' };
  }
}

function statSize(file: string): number | null {
  try {
    return fs.statSync(file).size;
  } catch {
    return null;
  }
}
