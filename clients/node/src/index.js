// EchoMQ for Node.js: the same Lua bundle and keys as the Python library.
export { LUA_DIR, Script, load, loadBundle, scriptNames } from './bundle.js';
export { Consumer, exponentialBackoff } from './consumer.js';
export * from './errors.js';
export { encode, isValid, mint, Minter } from './ids.js';
export { LAYOUTS, build } from './layouts.js';
export { Job, Queue } from './queue.js';
