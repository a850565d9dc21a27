import { realpathSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/** Write for the group or for everyone: someone besides the owner may add or replace entries. */
const WRITABLE_BY_OTHERS = 0o022;
/** The sticky bit: in such a directory (/tmp) others may add entries but not rename or remove anyone else's. */
const STICKY = 0o1000;

/** `path` and every directory above it, up to the root. */
function withParents(path: string): string[] {
  const chain = [path];
  for (let at = path; dirname(at) !== at; at = dirname(at)) chain.push(dirname(at));
  return chain;
}

/**
 * Why a socket directory is not one to send a password into, or undefined when it is: node-postgres connects to the
 * socket `<dir>/.s.PGSQL.<port>` of whoever placed it there, so a directory someone else can write to (another user,
 * a world-writable one such as /tmp) lets them listen in the server's place. It must be owned by this user or root,
 * and not writable by others; so must every directory above it (one writable by others may still hold it if sticky,
 * as /tmp is: then the directory cannot be swapped), on the path as written and on the one its symlinks lead to.
 */
export function socketDirectoryRisk(written: string): string | undefined {
  const dir = resolve(written);
  const uid = process.getuid?.();
  if (uid === undefined) return 'cannot be checked for its owner on this system';
  let real: string;
  try {
    real = realpathSync(dir);
  } catch {
    return 'does not exist or cannot be read';
  }
  const parents = new Set([...withParents(dir).slice(1), ...withParents(real).slice(1)]);
  for (const path of [real, ...parents]) {
    const { uid: owner, mode } = statSync(path);
    const subject = path === dir ? 'is' : path === real ? `leads to ${real}, which is` : `is under ${path}, which is`;
    if (owner !== uid && owner !== 0) return `${subject} owned by another user (uid ${owner})`;
    const sticky = path !== real && (mode & STICKY) !== 0;
    if ((mode & WRITABLE_BY_OTHERS) !== 0 && !sticky) return `${subject} writable by others (mode ${(mode & 0o7777).toString(8)})`;
  }
  return undefined;
}
