// The Lua bundle, loaded from lua/ and assembled exactly as echomq/scripts.py
// does, so every script's SHA1 is the one the Python library sends:
// `--- @include "name"` pulls in lua/include/name.lua once per script (a
// second mention becomes a comment), recursively, at load time.
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const LUA_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'lua');

// Python's read_text() turns \r\n and \r into \n; so do we.
const read = (path) => readFileSync(path, 'utf8').replace(/\r\n?/g, '\n');

function assemble(text, seen, dir) {
  const include = /^--- @include "([a-z_]+)"\s*$/gm;
  return text.replace(include, (_, name) => {
    if (seen.has(name)) return `-- (include ${name}: already above)`;
    seen.add(name);
    const body = read(join(dir, 'include', `${name}.lua`));
    return `-- >>> include ${name}\n${assemble(body, seen, dir)}\n-- <<< include ${name}`;
  });
}

const isNoScript = (err) => typeof err?.message === 'string' && err.message.startsWith('NOSCRIPT');

export class Script {
  constructor(name, source) {
    this.name = name;
    this.source = source;
    this.sha = createHash('sha1').update(source, 'utf8').digest('hex');
  }

  // EVALSHA; on NOSCRIPT (a restarted or flushed server) load and send again,
  // which is safe: a script that was not found did not run. Bulk replies come
  // back as Buffers, integers as numbers; error replies reject as they are.
  async run(client, keys, argv) {
    const args = [this.sha, keys.length, ...keys, ...argv];
    try {
      return await client.callBuffer('EVALSHA', ...args);
    } catch (err) {
      if (!isNoScript(err)) throw err;
      await client.call('SCRIPT', 'LOAD', this.source);
      return client.callBuffer('EVALSHA', ...args);
    }
  }
}

export function load(name, dir = LUA_DIR) {
  return new Script(name, assemble(read(join(dir, `${name}.lua`)), new Set(), dir));
}

// Every script of the bundle: one lua/<name>.lua per transition.
export function scriptNames(dir = LUA_DIR) {
  return readdirSync(dir).filter((f) => f.endsWith('.lua')).map((f) => f.slice(0, -4)).sort();
}

export function loadBundle(dir = LUA_DIR) {
  return Object.fromEntries(scriptNames(dir).map((name) => [name, load(name, dir)]));
}
