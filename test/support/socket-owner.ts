import fs from 'node:fs';

/**
 * The process that holds the client end of a loopback TCP connection to one of our fake servers:
 * the connection's client port is found in /proc/net/tcp (its socket's inode), then the process
 * with a file descriptor on that socket. Linux only; as root, every process's descriptors are
 * readable. Null when the connection is gone or no process holds it.
 */
export function processOfClientPort(clientPort: number, serverPort: number): number | null {
  const inode = socketInode(clientPort, serverPort);
  if (inode === null) return null;
  const target = `socket:[${inode}]`;
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let fds: string[];
    try {
      fds = fs.readdirSync(`/proc/${entry}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        if (fs.readlinkSync(`/proc/${entry}/fd/${fd}`) === target) return Number(entry);
      } catch {
        /* closed meanwhile */
      }
    }
  }
  return null;
}

function socketInode(clientPort: number, serverPort: number): string | null {
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length < 10) continue;
      const local = portOf(cols[1]!);
      const remote = portOf(cols[2]!);
      if (local === clientPort && remote === serverPort && cols[9] !== '0') return cols[9]!;
    }
  }
  return null;
}

function portOf(address: string): number {
  return parseInt(address.slice(address.lastIndexOf(':') + 1), 16);
}
