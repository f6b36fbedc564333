/**
 * P1: the container image, built here and run as it ships. This sandbox cannot start an OCI
 * runtime, so the image is built with `podman build --isolation chroot` on a base made by
 * debootstrap from the machine's own Debian sources (scripts/image/), and run by mounting the built
 * image (`podman image mount`) and starting its entrypoint under `chroot` as the image's own user,
 * with the image's own environment, working dir, entrypoint and command read from its config.
 * What a runtime adds (namespaces, cgroups, the health check's scheduling, compose) is not tested
 * here: docs/deploy.md says which parts are tested and which only read.
 */
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, it } from 'node:test';
import { freePort, SPEECH, speechWav, waitFor } from './support/harness.ts';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '..');
const TAG = 'localhost/verbatim:test';

interface ImageConfig {
  User: string;
  Env: string[];
  Entrypoint: string[];
  Cmd: string[];
  WorkingDir: string;
  Volumes: Record<string, object>;
}

let rootfs = '';
let dataDir = '';
const mounts: string[] = [];
let config: ImageConfig;
let user = { uid: 0, gid: 0 };

before(async () => {
  // The whole build, as an operator runs it (layers cached by podman; the base by base.sh).
  await run('bash', [path.join(ROOT, 'scripts/image/build.sh'), TAG], {
    cwd: ROOT,
    maxBuffer: 256 * 1024 * 1024,
    timeout: 20 * 60_000,
  });
  const inspected = JSON.parse(
    (await run('podman', ['image', 'inspect', '--format', '{{json .Config}}', TAG])).stdout,
  ) as ImageConfig;
  config = inspected;
  rootfs = (await run('podman', ['image', 'mount', TAG])).stdout.trim();
  // The image's own user, by its own /etc/passwd.
  const entry = fs
    .readFileSync(path.join(rootfs, 'etc/passwd'), 'utf8')
    .split('\n')
    .map((l) => l.split(':'))
    .find((f) => f[0] === config.User);
  assert.ok(entry, `the image's user ${config.User} is in its /etc/passwd`);
  user = { uid: Number(entry[2]), gid: Number(entry[3]) };
  // What a runtime would give it: /proc, /dev, a writable /tmp and its volume (the image is read-only).
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-image-data-'));
  fs.chownSync(dataDir, user.uid, user.gid);
  fs.chmodSync(dataDir, 0o700);
  const volume = Object.keys(config.Volumes)[0]!;
  const mount = async (args: string[], target: string) => {
    await run('mount', [...args, path.join(rootfs, target)]);
    mounts.unshift(path.join(rootfs, target));
  };
  await mount(['-t', 'proc', 'proc'], 'proc');
  // A /dev of its own (a tmpfs with the few nodes a service opens, and its own /dev/shm for
  // Postgres), never the host's: unmounting a bind of the host's could reach the host's mounts.
  await mount(['-t', 'tmpfs', '-o', 'mode=755', 'tmpfs'], 'dev');
  for (const [name, minor] of [
    ['null', 3],
    ['zero', 5],
    ['random', 8],
    ['urandom', 9],
  ] as const) {
    await run('mknod', ['-m', '666', path.join(rootfs, 'dev', name), 'c', '1', String(minor)]);
  }
  fs.mkdirSync(path.join(rootfs, 'dev/shm'));
  await mount(['-t', 'tmpfs', '-o', 'mode=1777', 'tmpfs'], 'dev/shm');
  await mount(['-t', 'tmpfs', '-o', 'mode=1777', 'tmpfs'], 'tmp');
  await mount(['--bind', dataDir], volume);
});

after(async () => {
  const failed: string[] = [];
  for (const target of mounts) await run('umount', [target]).catch(() => failed.push(target));
  assert.deepEqual(failed, [], 'every mount the test made is gone');
  if (rootfs) await run('podman', ['image', 'unmount', TAG]).catch(() => undefined);
  if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
});

/** The image's entrypoint with `args` (its command when none), inside the image as its user. */
function inImage(args: string[] | null, env: Record<string, string>): ChildProcess {
  const imageEnv = Object.fromEntries(
    config.Env.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]),
  );
  const all = { ...imageEnv, HOME: '/var/lib/verbatim', ...env };
  return spawn(
    'chroot',
    [
      `--userspec=${user.uid}:${user.gid}`,
      rootfs,
      '/usr/bin/env',
      '-i',
      ...Object.entries(all).map(([k, v]) => `${k}=${v}`),
      '/bin/sh',
      '-c',
      'cd "$0" && exec "$@"',
      config.WorkingDir,
      ...config.Entrypoint,
      ...(args ?? config.Cmd),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
}

function outputOf(child: ChildProcess): { text: () => string; exited: Promise<number | null> } {
  let text = '';
  child.stdout?.on('data', (d: Buffer) => (text += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (text += d.toString()));
  return { text: () => text, exited: new Promise((resolve) => child.on('exit', (code) => resolve(code))) };
}

void it('P1: the image, built from Debian trixie here and run as its non-root user, starts the service on its defaults, passes /readyz and verbatim doctor, and transcribes an upload', async () => {
  assert.notEqual(config.User, '', 'the image names a user');
  assert.notEqual(user.uid, 0, 'and it is not root');
  // Debian's own runtime, as the image ships it.
  const release = fs.readFileSync(path.join(rootfs, 'etc/os-release'), 'utf8');
  assert.match(release, /VERSION_CODENAME=trixie/);
  for (const binary of ['usr/bin/node', 'usr/bin/ffmpeg', 'usr/bin/pocketsphinx_continuous']) {
    assert.ok(fs.existsSync(path.join(rootfs, binary)), `${binary} is in the image`);
  }
  assert.equal(fs.existsSync(path.join(rootfs, 'app/src')), false, 'no sources in the runtime stage');
  assert.equal(fs.existsSync(path.join(rootfs, 'usr/bin/npm')), false, 'no npm in the runtime stage');

  const port = await freePort();
  const service = inImage(null, { VERBATIM_HOST: '127.0.0.1', VERBATIM_PORT: String(port) });
  const log = outputOf(service);
  const base = `http://127.0.0.1:${port}`;
  try {
    const ready = await waitFor(
      () => `/readyz to answer 200; the service said:\n${log.text().slice(-3000)}`,
      async () => {
        const res = await fetch(`${base}/readyz`).catch(() => null);
        return res?.status === 200 ? ((await res.json()) as Record<string, string>) : null;
      },
      180_000,
    );
    assert.deepEqual(ready, { status: 'ready', database: 'ok', migrations: 'ok', storage: 'ok' });
    // It runs as the image's user: the process and everything it wrote in its volume.
    const status = fs.readFileSync(`/proc/${service.pid}/status`, 'utf8');
    assert.match(status, new RegExp(`^Uid:\\s+${user.uid}\\s`, 'm'));
    for (const name of fs.readdirSync(dataDir)) {
      assert.equal(fs.statSync(path.join(dataDir, name)).uid, user.uid, `${name} is the user's`);
    }

    const doctor = inImage(['doctor'], {});
    const checked = outputOf(doctor);
    assert.equal(await checked.exited, 0, checked.text());
    assert.match(checked.text(), /^ok\s+recogniser \(pocketsphinx\)/m);
    assert.match(checked.text(), /^ok\s+database\s+PostgreSQL .*embedded/m);

    // An upload through the documented API, with the first key `start` wrote to the volume.
    const key = fs.readFileSync(path.join(dataDir, 'first-api-key'), 'utf8').trim();
    const auth = { authorization: `Bearer ${key}` };
    const created = await fetch(`${base}/v1/meetings`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ source: 'upload', title: 'from the image' }),
    });
    assert.equal(created.status, 201);
    const { id } = (await created.json()) as { id: string };
    const put = await fetch(`${base}/v1/meetings/${id}/recording`, {
      method: 'PUT',
      headers: { ...auth, 'content-type': 'audio/wav' },
      body: speechWav(SPEECH),
    });
    assert.equal(put.status, 202, await put.text());
    await waitFor(
      () => `the meeting to complete; the service said:\n${log.text().slice(-3000)}`,
      async () => {
        const res = await fetch(`${base}/v1/meetings/${id}`, { headers: auth });
        const meeting = (await res.json()) as { status: string };
        assert.notEqual(meeting.status, 'failed', JSON.stringify(meeting));
        return meeting.status === 'complete';
      },
      300_000,
    );
    const transcript = await fetch(`${base}/v1/meetings/${id}/transcript?format=txt`, { headers: auth });
    const text = (await transcript.text()).toLowerCase();
    for (const word of ['budget', 'marketing']) assert.ok(text.includes(word), `"${word}" in:\n${text}`);
  } finally {
    service.kill('SIGTERM');
    const code = await Promise.race([
      log.exited,
      new Promise<'slow'>((resolve) => setTimeout(() => resolve('slow'), 60_000)),
    ]);
    if (code === 'slow') service.kill('SIGKILL');
    // The embedded Postgres stopped with it: no process is left whose root is the image's.
    const left = fs
      .readdirSync('/proc')
      .filter((p) => /^\d+$/.test(p))
      .filter((p) => {
        try {
          return fs.readlinkSync(`/proc/${p}/root`) === rootfs;
        } catch {
          return false;
        }
      })
      .join(' ');
    if (left) await run('kill', ['-9', ...left.split(' ')]).catch(() => undefined);
    assert.equal(code, 0, `the service stopped cleanly on SIGTERM:\n${log.text().slice(-2000)}`);
    assert.equal(left, '', 'no process of the image user outlived the service');
  }
});
