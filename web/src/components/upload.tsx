import { useRef, useState } from 'preact/hooks';
import { authHeaders, call, type Meeting } from '../api.ts';

interface FileProgress {
  name: string;
  meetingId: string | null;
  sent: number;
  total: number;
  state: 'waiting' | 'uploading' | 'done' | 'failed' | 'canceled';
  error: string | null;
}

const TYPES: Record<string, string> = {
  wav: 'audio/wav',
  mp3: 'audio/mpeg',
  m4a: 'audio/mp4',
  mp4: 'audio/mp4',
  webm: 'audio/webm',
  ogg: 'audio/ogg',
  opus: 'audio/ogg',
  flac: 'audio/flac',
};

function typeOf(file: File): string {
  const ext = file.name.split('.').pop()?.toLowerCase() ?? '';
  return TYPES[ext] ?? (file.type || 'application/octet-stream');
}

/** E1: a meeting made from a file is titled by its name without the extension (`Team sync.m4a` → `Team sync`). */
export function titleOf(fileName: string): string {
  const title = fileName.replace(/\.[A-Za-z0-9]{1,5}$/, '').trim();
  return (title || fileName).slice(0, 300);
}

/** E5: the server refused the file itself (415: not audio it can read); its message is for people. */
class RefusedUpload extends Error {}

/** PUT with upload progress: fetch cannot report it, XMLHttpRequest can. */
function put(
  url: string,
  file: File,
  onProgress: (sent: number) => void,
  track: (x: XMLHttpRequest) => void,
) {
  return new Promise<void>((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    track(xhr);
    xhr.open('PUT', url);
    for (const [name, value] of Object.entries(authHeaders('PUT'))) xhr.setRequestHeader(name, value);
    xhr.setRequestHeader('content-type', typeOf(file));
    xhr.upload.onprogress = (e) => onProgress(e.loaded);
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) return resolve();
      let message = `the server answered ${xhr.status}`;
      const refused = xhr.status === 415;
      try {
        message = (JSON.parse(xhr.responseText) as { error: { message: string } }).error.message;
      } catch {
        /* keep the status */
      }
      reject(refused ? new RefusedUpload(message) : new Error(message));
    };
    xhr.onerror = () => reject(new Error('the server could not be reached'));
    xhr.onabort = () => reject(new Error('canceled'));
    xhr.send(file);
  });
}

/** Upload one recording, or several as a batch that can be canceled as a whole. */
export function Upload() {
  const input = useRef<HTMLInputElement>(null);
  const [files, setFiles] = useState<FileProgress[]>([]);
  const [batchId, setBatchId] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [canceled, setCanceled] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const requests = useRef<XMLHttpRequest[]>([]);
  const cancelRef = useRef(false);

  const patch = (i: number, p: Partial<FileProgress>) =>
    setFiles((list) => list.map((f, j) => (j === i ? { ...f, ...p } : f)));

  const start = async (e: Event) => {
    e.preventDefault();
    const chosen = Array.from(input.current?.files ?? []);
    if (chosen.length === 0) return;
    setBusy(true);
    setError(null);
    setCanceled(false);
    cancelRef.current = false;
    requests.current = [];
    setFiles(
      chosen.map((f) => ({
        name: f.name,
        meetingId: null,
        sent: 0,
        total: f.size,
        state: 'waiting',
        error: null,
      })),
    );
    let batch: string | null = null;
    try {
      if (chosen.length > 1) {
        batch = (
          await call<{ id: string }>('POST', '/v1/batches', { title: `Upload of ${chosen.length} files` })
        ).id;
        setBatchId(batch);
      } else {
        setBatchId(null);
      }
      // One at a time: the uploads share the user's upstream bandwidth anyway.
      for (const [i, file] of chosen.entries()) {
        if (cancelRef.current) {
          patch(i, { state: 'canceled' });
          continue;
        }
        let made: string | null = null;
        try {
          const m = await call<Meeting>('POST', '/v1/meetings', {
            source: 'upload',
            title: titleOf(file.name),
            ...(batch ? { batchId: batch } : {}),
          });
          made = m.id;
          patch(i, { meetingId: m.id, state: 'uploading' });
          await put(
            `/v1/meetings/${m.id}/recording`,
            file,
            (sent) => patch(i, { sent }),
            (x) => requests.current.push(x),
          );
          patch(i, { sent: file.size, state: 'done' });
        } catch (err) {
          // E5: a file the server refused leaves no empty meeting behind in the list.
          if (made && err instanceof RefusedUpload) {
            await call('DELETE', `/v1/meetings/${made}`).catch(() => undefined);
            patch(i, { meetingId: null, sent: 0 });
          }
          patch(i, {
            state: cancelRef.current ? 'canceled' : 'failed',
            error: cancelRef.current ? null : err instanceof Error ? err.message : String(err),
          });
        }
      }
    } catch (err) {
      setError(`The upload could not start: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      setBusy(false);
    }
  };

  const cancel = async () => {
    cancelRef.current = true;
    setCanceled(true);
    for (const x of requests.current) x.abort();
    if (batchId) {
      try {
        await call('POST', `/v1/batches/${batchId}/cancel`);
      } catch (err) {
        setError(`The batch could not be canceled: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
  };

  return (
    <section class="card" aria-labelledby="upload-heading">
      <h2 id="upload-heading">Upload recordings</h2>
      <form onSubmit={(e) => void start(e)} class="row">
        <label for="upload-files" class="grow">
          Audio files (several at once form a batch)
          <input
            id="upload-files"
            ref={input}
            type="file"
            multiple
            accept="audio/*,video/webm,.wav,.mp3,.m4a,.webm,.ogg,.opus,.flac"
          />
        </label>
        <button type="submit" disabled={busy}>
          Upload
        </button>
        {batchId && (busy || files.some((f) => f.state === 'done')) && !canceled && (
          <button type="button" class="danger" onClick={() => void cancel()}>
            Cancel batch
          </button>
        )}
      </form>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {canceled && <p role="status">The batch was canceled.</p>}
      {files.length > 0 && (
        <ul class="uploads" aria-label="Uploads">
          {files.map((f, i) => (
            <li key={i} data-upload-state={f.state}>
              <label>
                {f.meetingId ? <a href={`#/meetings/${f.meetingId}`}>{f.name}</a> : f.name}{' '}
                <span class="muted">
                  {f.state === 'uploading'
                    ? `${Math.round((100 * f.sent) / Math.max(1, f.total))} %`
                    : f.state === 'done'
                      ? 'uploaded'
                      : f.state}
                  {f.error ? `: ${f.error}` : ''}
                </span>
                <progress max={Math.max(1, f.total)} value={f.sent} aria-label={`Upload of ${f.name}`} />
              </label>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
