import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export interface Cluster {
  url: string;
  /** A fast restart (pg_ctl restart -m fast): every session is cut, the server is back when it returns. */
  restart(): void;
  /** The same restart without blocking this process's event loop (servers in it keep answering). */
  restartAsync(): Promise<void>;
  stop(): void;
}

/** A throwaway Postgres cluster of Debian's own build on its own port, so the test may restart it. */
export function startCluster(port: number): Cluster {
  const version = fs.readdirSync('/usr/lib/postgresql').sort().at(-1)!;
  const bin = (name: string) => `/usr/lib/postgresql/${version}/bin/${name}`;
  const dir = `/tmp/verbatim-pg-${process.pid}-${port}`;
  // A cluster left on this port by a run that was killed (its process gone) would hold the port.
  for (const name of fs.readdirSync('/tmp')) {
    const m = /^verbatim-pg-(\d+)-(\d+)$/.exec(name);
    if (!m || Number(m[2]) !== port || Number(m[1]) === process.pid || alive(Number(m[1]))) continue;
    try {
      execFileSync(
        'runuser',
        ['-u', 'postgres', '--', bin('pg_ctl'), '-D', `/tmp/${name}/data`, 'stop', '-m', 'immediate'],
        {
          stdio: 'ignore',
        },
      );
    } catch {
      // not running
    }
    fs.rmSync(`/tmp/${name}`, { recursive: true, force: true });
  }
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { mode: 0o755 });
  execFileSync('chown', ['postgres:postgres', dir]);
  const asPostgres = (cmd: string, args: string[]) =>
    execFileSync('runuser', ['-u', 'postgres', '--', bin(cmd), ...args], { stdio: 'ignore' });
  asPostgres('initdb', ['-D', path.join(dir, 'data'), '-A', 'trust', '-U', 'postgres']);
  const ctlArgs = (action: string, extra: string[] = []) => [
    '-u',
    'postgres',
    '--',
    bin('pg_ctl'),
    '-D',
    path.join(dir, 'data'),
    '-l',
    path.join(dir, 'log'),
    '-o',
    `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=300`,
    '-w',
    action,
    ...extra,
  ];
  const ctl = (action: string, extra: string[] = []) =>
    execFileSync('runuser', ctlArgs(action, extra), { stdio: 'ignore' });
  ctl('start');
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    restart: () => ctl('restart', ['-m', 'fast']),
    restartAsync: () =>
      new Promise<void>((resolve, reject) =>
        execFile('runuser', ctlArgs('restart', ['-m', 'fast']), (err) =>
          err ? reject(new Error(err.message)) : resolve(),
        ),
      ),
    stop: () => {
      try {
        ctl('stop', ['-m', 'immediate']);
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
