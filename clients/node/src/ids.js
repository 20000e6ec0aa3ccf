// Branded ids (the wire contract, section 1): a 3-letter brand and 11 base62
// characters carrying a 63-bit snowflake (ms since 2024-01-01 << 22 | node <<
// 12 | seq). The alphabet is ASCII-ordered and the width fixed, so mint order
// is byte order is a sorted set's order.
import { ArgumentError, InvalidName } from './errors.js';

export const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
export const EPOCH_MS = 1704067200000n;
const WIDTH = 11;
const MAX_N = (1n << 63n) - 1n;
const MAX_NODE = 1023;
const MAX_MINT_SEQ = 2047n; // a minter's per-ms sequence: ids with its top bit set are schedule ticks
const SHAPE = /^[A-Z]{3}[0-9A-Za-z]{11}$/;
export const MAX_PAYLOAD = encodeN(MAX_N); // 'AzL8n0Y58m7'

function encodeN(n) {
  let out = '';
  for (let i = 0; i < WIDTH; i++) {
    out = ALPHABET[Number(n % 62n)] + out;
    n /= 62n;
  }
  return out;
}

export function encode(brand, n) {
  if (typeof brand !== 'string' || !/^[A-Z]{3}$/.test(brand)) throw new InvalidName(`brand must be three upper-case letters, got ${brand}`);
  n = BigInt(n);
  if (n < 0n || n > MAX_N) throw new InvalidName(`n must be in [0, 2^63-1], got ${n}`);
  return brand + encodeN(n);
}

export function isValid(s) {
  return typeof s === 'string' && SHAPE.test(s) && s.slice(3) <= MAX_PAYLOAD;
}

export class Minter {
  constructor(node = Number(process.env.ECHOMQ_NODE_ID ?? process.pid) & MAX_NODE, clock = Date.now) {
    if (!Number.isInteger(node) || node < 0 || node > MAX_NODE) throw new ArgumentError(`node id must be in [0, ${MAX_NODE}]`);
    this.node = BigInt(node);
    this.clock = clock;
    this.lastMs = -1n;
    this.seq = 0n;
  }

  // Strictly increasing: a stalled or stepped-back clock keeps counting from
  // the last value; a full sequence borrows into the next millisecond.
  nextN() {
    const now = BigInt(this.clock()) - EPOCH_MS;
    if (now > this.lastMs) {
      this.lastMs = now;
      this.seq = 0n;
    } else if (this.seq < MAX_MINT_SEQ) {
      this.seq += 1n;
    } else {
      this.lastMs += 1n;
      this.seq = 0n;
    }
    return (this.lastMs << 22n) | (this.node << 12n) | this.seq;
  }

  mint(brand) {
    return encode(brand, this.nextN());
  }
}

const minter = new Minter();
export const mint = (brand) => minter.mint(brand);
