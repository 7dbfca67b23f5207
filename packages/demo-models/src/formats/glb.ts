/**
 * A glTF 2.0 binary (GLB) writer for one indexed triangle mesh with normals and vertex colours, which every glTF
 * viewer (three.js editor, Blender, Windows 3D Viewer, model-viewer, macOS Quick Look via Reality Converter) opens.
 */

export interface Mesh {
  positions: Float32Array;
  normals: Float32Array;
  colors: Float32Array;
  indices: Uint16Array | Uint32Array;
}

export interface GlbMaterial {
  name: string;
  baseColor: [number, number, number, number];
  metallic: number;
  roughness: number;
}

const ARRAY_BUFFER = 34962;
const ELEMENT_ARRAY_BUFFER = 34963;
const FLOAT = 5126;
const UNSIGNED_SHORT = 5123;
const UNSIGNED_INT = 5125;
const CHUNK_JSON = 0x4e4f534a;
const CHUNK_BIN = 0x004e4942;

function pad4(n: number): number {
  return (n + 3) & ~3;
}

function minMax(values: Float32Array, components: number): { min: number[]; max: number[] } {
  const min = new Array<number>(components).fill(Infinity);
  const max = new Array<number>(components).fill(-Infinity);
  for (let i = 0; i < values.length; i++) {
    const c = i % components;
    if (values[i] < min[c]) min[c] = values[i];
    if (values[i] > max[c]) max[c] = values[i];
  }
  // Stored as float32, so the bounds must be the float32 values too or validators flag a mismatch.
  return { min: min.map(Math.fround), max: max.map(Math.fround) };
}

export function encodeGlb(mesh: Mesh, material: GlbMaterial, meshName: string): Uint8Array {
  const vertexCount = mesh.positions.length / 3;
  const views = [
    { data: mesh.positions, target: ARRAY_BUFFER },
    { data: mesh.normals, target: ARRAY_BUFFER },
    { data: mesh.colors, target: ARRAY_BUFFER },
    { data: mesh.indices, target: ELEMENT_ARRAY_BUFFER },
  ];
  let offset = 0;
  const bufferViews = views.map(({ data, target }) => {
    const view = { buffer: 0, byteOffset: offset, byteLength: data.byteLength, target };
    offset = pad4(offset + data.byteLength);
    return view;
  });
  const binLength = offset;
  const position = minMax(mesh.positions, 3);

  const json = {
    asset: { version: '2.0', generator: '@genservice/demo-models' },
    scene: 0,
    scenes: [{ name: meshName, nodes: [0] }],
    nodes: [{ name: meshName, mesh: 0 }],
    meshes: [
      {
        name: meshName,
        primitives: [{ attributes: { POSITION: 0, NORMAL: 1, COLOR_0: 2 }, indices: 3, material: 0, mode: 4 }],
      },
    ],
    materials: [
      {
        name: material.name,
        pbrMetallicRoughness: {
          baseColorFactor: material.baseColor,
          metallicFactor: material.metallic,
          roughnessFactor: material.roughness,
        },
      },
    ],
    accessors: [
      { bufferView: 0, componentType: FLOAT, count: vertexCount, type: 'VEC3', min: position.min, max: position.max },
      { bufferView: 1, componentType: FLOAT, count: vertexCount, type: 'VEC3' },
      { bufferView: 2, componentType: FLOAT, count: vertexCount, type: 'VEC3' },
      {
        bufferView: 3,
        componentType: mesh.indices instanceof Uint32Array ? UNSIGNED_INT : UNSIGNED_SHORT,
        count: mesh.indices.length,
        type: 'SCALAR',
      },
    ],
    bufferViews,
    buffers: [{ byteLength: binLength }],
  };

  const jsonBytes = new TextEncoder().encode(JSON.stringify(json));
  const jsonLength = pad4(jsonBytes.length);
  const total = 12 + 8 + jsonLength + 8 + binLength;
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  view.setUint32(0, 0x46546c67, true); // "glTF"
  view.setUint32(4, 2, true);
  view.setUint32(8, total, true);
  view.setUint32(12, jsonLength, true);
  view.setUint32(16, CHUNK_JSON, true);
  out.set(jsonBytes, 20);
  // The JSON chunk is padded with spaces, the binary chunk with zeros, as the GLB spec requires.
  out.fill(0x20, 20 + jsonBytes.length, 20 + jsonLength);
  const binStart = 20 + jsonLength;
  view.setUint32(binStart, binLength, true);
  view.setUint32(binStart + 4, CHUNK_BIN, true);
  // Typed arrays use the platform's byte order; glTF wants little-endian, which every platform Node ships for is.
  views.forEach(({ data }, i) => {
    out.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), binStart + 8 + bufferViews[i].byteOffset);
  });
  return out;
}
