// Read-only bind mounts of the cache into the kubelet's volume paths. The image carries a static
// busybox for its `mount` (the runtime base has no shell and no util-linux); elsewhere the system's.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** How `mount` and `umount` are run: ['mount'], or ['/usr/local/bin/busybox', 'mount']. */
export interface MountCommands {
  mount: string[];
  umount: string[];
}

export function mountCommands(busybox: string | undefined): MountCommands {
  return busybox
    ? { mount: [busybox, 'mount'], umount: [busybox, 'umount'] }
    : { mount: ['mount'], umount: ['umount'] };
}

async function exec([file, ...pre]: string[], args: string[]): Promise<void> {
  await run(file!, [...pre, ...args], { timeout: 30_000 }).catch((err: Error & { stderr?: string }) => {
    throw new Error(`${[file, ...pre, ...args].join(' ')}: ${(err.stderr ?? '').trim() || err.message}`);
  });
}

/** Binds `source` at `target`, then makes that mount read-only: no process of the Pod can write the entry. */
export async function bindReadOnly(c: MountCommands, source: string, target: string): Promise<void> {
  await exec(c.mount, ['-o', 'bind', source, target]);
  try {
    await exec(c.mount, ['-o', 'remount,bind,ro', target]);
  } catch (err) {
    // Never left writable.
    await exec(c.umount, [target]).catch(() => undefined);
    throw err;
  }
}

export async function unmount(c: MountCommands, target: string): Promise<void> {
  await exec(c.umount, [target]);
}

/** Whether `target` is a mount point in this mount namespace (/proc/self/mountinfo, octal escapes read). */
export async function isMounted(target: string): Promise<boolean> {
  const info = await readFile('/proc/self/mountinfo', 'utf8').catch(() => '');
  const unescape = (p: string) => p.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
  return info.split('\n').some((line) => unescape(line.split(' ')[4] ?? '') === target);
}
