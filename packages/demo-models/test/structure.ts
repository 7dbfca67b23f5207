import { expect } from 'vitest';

/** Checks a canonical PCM WAV header against the data; returns the format and the samples. */
export function checkWav(bytes: Uint8Array): { sampleRate: number; channels: number; bits: number; samples: Int16Array } {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const text = (offset: number): string => String.fromCharCode(...bytes.subarray(offset, offset + 4));
  expect(text(0)).toBe('RIFF');
  expect(view.getUint32(4, true)).toBe(bytes.length - 8);
  expect(text(8)).toBe('WAVE');
  expect(text(12)).toBe('fmt ');
  expect(view.getUint32(16, true)).toBe(16);
  expect(view.getUint16(20, true)).toBe(1); // PCM
  const channels = view.getUint16(22, true);
  const sampleRate = view.getUint32(24, true);
  const bits = view.getUint16(34, true);
  expect(view.getUint32(28, true)).toBe((sampleRate * channels * bits) / 8);
  expect(view.getUint16(32, true)).toBe((channels * bits) / 8);
  expect(text(36)).toBe('data');
  const dataBytes = view.getUint32(40, true);
  expect(44 + dataBytes).toBe(bytes.length);
  const samples = new Int16Array(dataBytes / 2);
  for (let i = 0; i < samples.length; i++) samples[i] = view.getInt16(44 + i * 2, true);
  return { sampleRate, channels, bits, samples };
}

interface GltfJson {
  asset: { version: string };
  scene: number;
  scenes: Array<{ nodes: number[] }>;
  nodes: Array<{ mesh?: number }>;
  meshes: Array<{ primitives: Array<{ attributes: Record<string, number>; indices?: number; material?: number; mode?: number }> }>;
  materials: Array<{ pbrMetallicRoughness: { baseColorFactor: number[] } }>;
  accessors: Array<{ bufferView: number; byteOffset?: number; componentType: number; count: number; type: string; min?: number[]; max?: number[] }>;
  bufferViews: Array<{ buffer: number; byteOffset?: number; byteLength: number; target?: number }>;
  buffers: Array<{ byteLength: number; uri?: string }>;
}

const COMPONENTS: Record<string, number> = { SCALAR: 1, VEC2: 2, VEC3: 3, VEC4: 4 };
const COMPONENT_BYTES: Record<number, number> = { 5121: 1, 5123: 2, 5125: 4, 5126: 4 };

/**
 * Checks the GLB container (header, 4-byte aligned JSON and BIN chunks, lengths), that every accessor fits its
 * buffer view, that POSITION min/max are the real bounds, that indices stay in range and normals are unit length.
 */
export function checkGlb(bytes: Uint8Array): { json: GltfJson; vertices: number; triangles: number } {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  expect(view.getUint32(0, true)).toBe(0x46546c67);
  expect(view.getUint32(4, true)).toBe(2);
  expect(view.getUint32(8, true)).toBe(bytes.length);
  const jsonLength = view.getUint32(12, true);
  expect(view.getUint32(16, true)).toBe(0x4e4f534a);
  expect(jsonLength % 4).toBe(0);
  const json = JSON.parse(new TextDecoder().decode(bytes.subarray(20, 20 + jsonLength))) as GltfJson;
  const binHeader = 20 + jsonLength;
  const binLength = view.getUint32(binHeader, true);
  expect(view.getUint32(binHeader + 4, true)).toBe(0x004e4942);
  expect(binLength % 4).toBe(0);
  expect(binHeader + 8 + binLength).toBe(bytes.length);
  const bin = binHeader + 8;

  expect(json.asset.version).toBe('2.0');
  expect(json.buffers).toHaveLength(1);
  expect(json.buffers[0].uri).toBeUndefined();
  expect(json.buffers[0].byteLength).toBeLessThanOrEqual(binLength);
  expect(json.scenes[json.scene].nodes.length).toBeGreaterThan(0);
  for (const bv of json.bufferViews) {
    expect((bv.byteOffset ?? 0) + bv.byteLength).toBeLessThanOrEqual(json.buffers[0].byteLength);
  }
  const read = (index: number): number[] => {
    const a = json.accessors[index];
    const bv = json.bufferViews[a.bufferView];
    const size = COMPONENTS[a.type];
    const componentBytes = COMPONENT_BYTES[a.componentType];
    const start = bin + (bv.byteOffset ?? 0) + (a.byteOffset ?? 0);
    expect((start - bin) % componentBytes).toBe(0);
    expect((a.byteOffset ?? 0) + a.count * size * componentBytes).toBeLessThanOrEqual(bv.byteLength);
    const values: number[] = [];
    for (let i = 0; i < a.count * size; i++) {
      const at = start + i * componentBytes;
      values.push(
        a.componentType === 5126
          ? view.getFloat32(at, true)
          : a.componentType === 5125
            ? view.getUint32(at, true)
            : a.componentType === 5123
              ? view.getUint16(at, true)
              : bytes[at],
      );
    }
    return values;
  };

  let triangles = 0;
  let vertices = 0;
  for (const mesh of json.meshes) {
    for (const primitive of mesh.primitives) {
      expect(primitive.mode ?? 4).toBe(4);
      const positionAccessor = json.accessors[primitive.attributes.POSITION];
      expect(positionAccessor.type).toBe('VEC3');
      const positions = read(primitive.attributes.POSITION);
      const min = [Infinity, Infinity, Infinity];
      const max = [-Infinity, -Infinity, -Infinity];
      positions.forEach((v, i) => {
        min[i % 3] = Math.min(min[i % 3], v);
        max[i % 3] = Math.max(max[i % 3], v);
      });
      expect(positionAccessor.min).toEqual(min);
      expect(positionAccessor.max).toEqual(max);
      vertices += positionAccessor.count;
      for (const [name, index] of Object.entries(primitive.attributes)) {
        expect(json.accessors[index].count).toBe(positionAccessor.count);
        if (name === 'NORMAL') {
          const normals = read(index);
          for (let i = 0; i < normals.length; i += 3) expect(Math.hypot(normals[i], normals[i + 1], normals[i + 2])).toBeCloseTo(1, 4);
        }
      }
      if (primitive.indices !== undefined) {
        const indices = read(primitive.indices);
        expect(indices.length % 3).toBe(0);
        expect(Math.max(...indices)).toBeLessThan(positionAccessor.count);
        triangles += indices.length / 3;
      }
    }
  }
  return { json, vertices, triangles };
}

class BitReader {
  private bit = 0;
  constructor(private readonly bytes: Uint8Array) {}
  u(n: number): number {
    let v = 0;
    for (let i = 0; i < n; i++) {
      v = (v << 1) | ((this.bytes[this.bit >> 3] >> (7 - (this.bit & 7))) & 1);
      this.bit++;
    }
    return v;
  }
  ue(): number {
    let zeros = 0;
    while (this.u(1) === 0) zeros++;
    return (1 << zeros) - 1 + this.u(zeros);
  }
  se(): number {
    const k = this.ue();
    if (k === 0) return 0;
    return k % 2 === 1 ? (k + 1) / 2 : -k / 2;
  }
  align(): void {
    while (this.bit % 8 !== 0) expect(this.u(1)).toBe(0);
  }
  bytesAt(n: number): Uint8Array {
    expect(this.bit % 8).toBe(0);
    const out = this.bytes.subarray(this.bit >> 3, (this.bit >> 3) + n);
    this.bit += n * 8;
    return out;
  }
  /** Asserts rbsp_trailing_bits end the data exactly. */
  trailing(): void {
    expect(this.u(1)).toBe(1);
    this.align();
    expect(this.bit >> 3).toBe(this.bytes.length);
  }
}

function unescape(nal: Uint8Array): Uint8Array {
  const out: number[] = [];
  let zeros = 0;
  for (const b of nal) {
    if (zeros === 2 && b === 3) {
      zeros = 0;
      continue;
    }
    out.push(b);
    zeros = b === 0 ? zeros + 1 : 0;
  }
  return Uint8Array.from(out);
}

/** Parses an SPS NAL (with its header byte) as written by the encoder; returns the cropped picture size. */
export function parseSps(nal: Uint8Array): { width: number; height: number; mbWidth: number; mbHeight: number; profile: number } {
  expect(nal[0] & 0x1f).toBe(7);
  const r = new BitReader(unescape(nal.subarray(1)));
  const profile = r.u(8);
  r.u(8);
  r.u(8);
  expect(r.ue()).toBe(0);
  r.ue(); // log2_max_frame_num_minus4
  expect(r.ue()).toBe(2); // poc type
  r.ue();
  r.u(1);
  const mbWidth = r.ue() + 1;
  const mbHeight = r.ue() + 1;
  expect(r.u(1)).toBe(1); // frame_mbs_only
  r.u(1);
  let cropRight = 0;
  let cropBottom = 0;
  if (r.u(1) === 1) {
    r.ue();
    cropRight = r.ue();
    r.ue();
    cropBottom = r.ue();
  }
  expect(r.u(1)).toBe(0); // no VUI
  r.trailing();
  return { width: mbWidth * 16 - cropRight * 2, height: mbHeight * 16 - cropBottom * 2, mbWidth, mbHeight, profile };
}

/**
 * Decodes an IDR slice NAL made of I_PCM macroblocks back into its Y, U and V planes (padded to whole
 * macroblocks). Every syntax element is checked, so a bit out of place fails here before a player sees it.
 */
export function decodeIPcmSlice(nal: Uint8Array, mbWidth: number, mbHeight: number): { y: Uint8Array; u: Uint8Array; v: Uint8Array } {
  expect(nal[0] & 0x1f).toBe(5);
  const r = new BitReader(unescape(nal.subarray(1)));
  expect(r.ue()).toBe(0); // first_mb_in_slice
  expect(r.ue()).toBe(7); // I slice
  expect(r.ue()).toBe(0); // pps id
  expect(r.u(4)).toBe(0); // frame_num
  r.ue(); // idr_pic_id
  r.u(1);
  r.u(1);
  expect(r.se()).toBe(0);
  expect(r.ue()).toBe(1);
  const lumaWidth = mbWidth * 16;
  const y = new Uint8Array(lumaWidth * mbHeight * 16);
  const u = new Uint8Array((lumaWidth / 2) * mbHeight * 8);
  const v = new Uint8Array(u.length);
  for (let mbY = 0; mbY < mbHeight; mbY++) {
    for (let mbX = 0; mbX < mbWidth; mbX++) {
      expect(r.ue()).toBe(25); // I_PCM
      r.align();
      const block = r.bytesAt(384);
      for (let row = 0; row < 16; row++) y.set(block.subarray(row * 16, row * 16 + 16), (mbY * 16 + row) * lumaWidth + mbX * 16);
      for (let row = 0; row < 8; row++) {
        u.set(block.subarray(256 + row * 8, 256 + row * 8 + 8), (mbY * 8 + row) * (lumaWidth / 2) + mbX * 8);
        v.set(block.subarray(320 + row * 8, 320 + row * 8 + 8), (mbY * 8 + row) * (lumaWidth / 2) + mbX * 8);
      }
    }
  }
  r.trailing();
  return { y, u, v };
}

/** The avcC SPS and every sample NAL of an MP4 written by muxMp4 (one track, one chunk). */
export function mp4Nals(bytes: Uint8Array): { sps: Uint8Array; pps: Uint8Array; samples: Uint8Array[] } {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const find = (type: string): number => {
    const needle = Array.from(type, (c) => c.charCodeAt(0));
    for (let i = 4; i < bytes.length - 4; i++) {
      if (needle.every((b, k) => bytes[i + k] === b)) return i - 4;
    }
    throw new Error(`no ${type}`);
  };
  const avcC = find('avcC');
  let offset = avcC + 8 + 6;
  const spsLength = view.getUint16(offset);
  const sps = bytes.subarray(offset + 2, offset + 2 + spsLength);
  offset += 2 + spsLength;
  expect(bytes[offset]).toBe(1);
  const ppsLength = view.getUint16(offset + 1);
  const pps = bytes.subarray(offset + 3, offset + 3 + ppsLength);
  const stsz = find('stsz');
  const count = view.getUint32(stsz + 16);
  const mdat = find('mdat');
  const samples: Uint8Array[] = [];
  let at = mdat + 8;
  for (let i = 0; i < count; i++) {
    const size = view.getUint32(stsz + 20 + i * 4);
    const length = view.getUint32(at);
    expect(length + 4).toBe(size);
    samples.push(bytes.subarray(at + 4, at + 4 + length));
    at += size;
  }
  return { sps, pps, samples };
}
