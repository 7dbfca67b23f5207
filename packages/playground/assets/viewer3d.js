// An interactive view of a glTF 2.0 model (GLB, or .gltf JSON with embedded or relative buffers) in WebGL, with no
// library: triangles with POSITION, NORMAL (computed when missing), COLOR_0 and the material's base colour, lit by
// one light. Drag (or arrow keys) turns it, the wheel (or + and -) zooms. Nothing is animated: it draws on demand.

const GLB_MAGIC = 0x46546c67; // 'glTF'
const CHUNK_JSON = 0x4e4f534a;
const CHUNK_BIN = 0x004e4942;
const COMPONENTS = { SCALAR: 1, VEC2: 2, VEC3: 3, VEC4: 4, MAT4: 16 };
const ARRAYS = { 5120: Int8Array, 5121: Uint8Array, 5122: Int16Array, 5123: Uint16Array, 5125: Uint32Array, 5126: Float32Array };
const NORMALIZE = { 5120: 127, 5121: 255, 5122: 32767, 5123: 65535 };

/** Thrown for a file this viewer cannot show; the message is for the page. */
export class ModelError extends Error {}

/**
 * Splits a GLB container into its JSON and binary chunk, or reads a .gltf JSON file.
 * @param {ArrayBuffer} bytes
 * @returns {{ json: any, bin: ArrayBuffer | null }}
 */
export function parseGltfContainer(bytes) {
  const view = new DataView(bytes);
  if (bytes.byteLength >= 12 && view.getUint32(0, true) === GLB_MAGIC) {
    if (view.getUint32(4, true) !== 2) throw new ModelError('Only glTF 2.0 files can be shown.');
    let offset = 12;
    let json = null;
    let bin = null;
    while (offset + 8 <= bytes.byteLength) {
      const length = view.getUint32(offset, true);
      const type = view.getUint32(offset + 4, true);
      const start = offset + 8;
      if (start + length > bytes.byteLength) throw new ModelError('The GLB file is cut short.');
      if (type === CHUNK_JSON) json = JSON.parse(new TextDecoder().decode(new Uint8Array(bytes, start, length)));
      else if (type === CHUNK_BIN && !bin) bin = bytes.slice(start, start + length);
      offset = start + length + ((4 - (length % 4)) % 4);
    }
    if (!json) throw new ModelError('The GLB file has no JSON chunk.');
    return { json, bin };
  }
  try {
    return { json: JSON.parse(new TextDecoder().decode(bytes)), bin: null };
  } catch {
    throw new ModelError('The file is neither GLB nor glTF JSON.');
  }
}

/** Loads the buffers a glTF names: the GLB's own chunk, data: URIs, or files relative to the model's URL. */
async function loadBuffers(json, bin, baseUrl) {
  return Promise.all(
    (json.buffers ?? []).map(async (b, i) => {
      if (b.uri === undefined) {
        if (i === 0 && bin) return bin;
        throw new ModelError('A buffer of the model is missing.');
      }
      const res = await fetch(new URL(b.uri, baseUrl));
      if (!res.ok) throw new ModelError('A buffer of the model could not be loaded.');
      return res.arrayBuffer();
    }),
  );
}

function readAccessor(json, buffers, index) {
  const a = json.accessors?.[index];
  if (!a) throw new ModelError('The model refers to a missing accessor.');
  const size = COMPONENTS[a.type];
  const Type = ARRAYS[a.componentType];
  if (!size || !Type) throw new ModelError('The model uses an unsupported accessor type.');
  const out = new Float32Array(a.count * size);
  if (a.bufferView === undefined) return out; // all zeros (sparse accessors are not supported)
  const bv = json.bufferViews[a.bufferView];
  const buffer = buffers[bv.buffer];
  const start = (bv.byteOffset ?? 0) + (a.byteOffset ?? 0);
  const stride = bv.byteStride || size * Type.BYTES_PER_ELEMENT;
  const scale = a.normalized ? NORMALIZE[a.componentType] ?? 1 : 1;
  const view = new DataView(buffer);
  const get = {
    5120: (o) => view.getInt8(o),
    5121: (o) => view.getUint8(o),
    5122: (o) => view.getInt16(o, true),
    5123: (o) => view.getUint16(o, true),
    5125: (o) => view.getUint32(o, true),
    5126: (o) => view.getFloat32(o, true),
  }[a.componentType];
  if (start + stride * (a.count - 1) + size * Type.BYTES_PER_ELEMENT > buffer.byteLength) throw new ModelError('An accessor reads past its buffer.');
  for (let i = 0; i < a.count; i++) {
    for (let c = 0; c < size; c++) out[i * size + c] = get(start + i * stride + c * Type.BYTES_PER_ELEMENT) / scale;
  }
  return out;
}

// 4x4 column-major matrices.
const identity = () => new Float32Array([1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]);
function multiply(a, b) {
  const o = new Float32Array(16);
  for (let c = 0; c < 4; c++) for (let r = 0; r < 4; r++) o[c * 4 + r] = a[r] * b[c * 4] + a[4 + r] * b[c * 4 + 1] + a[8 + r] * b[c * 4 + 2] + a[12 + r] * b[c * 4 + 3];
  return o;
}
function fromTrs(t = [0, 0, 0], q = [0, 0, 0, 1], s = [1, 1, 1]) {
  const [x, y, z, w] = q;
  return new Float32Array([
    (1 - 2 * (y * y + z * z)) * s[0], 2 * (x * y + z * w) * s[0], 2 * (x * z - y * w) * s[0], 0,
    2 * (x * y - z * w) * s[1], (1 - 2 * (x * x + z * z)) * s[1], 2 * (y * z + x * w) * s[1], 0,
    2 * (x * z + y * w) * s[2], 2 * (y * z - x * w) * s[2], (1 - 2 * (x * x + y * y)) * s[2], 0,
    t[0], t[1], t[2], 1,
  ]);
}
function perspective(fovy, aspect, near, far) {
  const f = 1 / Math.tan(fovy / 2);
  return new Float32Array([f / aspect, 0, 0, 0, 0, f, 0, 0, 0, 0, (far + near) / (near - far), -1, 0, 0, (2 * far * near) / (near - far), 0]);
}
function rotationX(a) {
  const c = Math.cos(a), s = Math.sin(a);
  return new Float32Array([1, 0, 0, 0, 0, c, s, 0, 0, -s, c, 0, 0, 0, 0, 1]);
}
function rotationY(a) {
  const c = Math.cos(a), s = Math.sin(a);
  return new Float32Array([c, 0, -s, 0, 0, 1, 0, 0, s, 0, c, 0, 0, 0, 0, 1]);
}
function translation(x, y, z) {
  const m = identity();
  m[12] = x;
  m[13] = y;
  m[14] = z;
  return m;
}
function transformPoint(m, x, y, z) {
  return [m[0] * x + m[4] * y + m[8] * z + m[12], m[1] * x + m[5] * y + m[9] * z + m[13], m[2] * x + m[6] * y + m[10] * z + m[14]];
}
function transformDir(m, x, y, z) {
  return [m[0] * x + m[4] * y + m[8] * z, m[1] * x + m[5] * y + m[9] * z, m[2] * x + m[6] * y + m[10] * z];
}

/**
 * Flattens a glTF scene into plain triangle arrays in world space (positions, normals, colours; three floats each).
 * @returns {{ positions: Float32Array, normals: Float32Array, colors: Float32Array, triangles: number }}
 */
export function flattenScene(json, buffers) {
  const positions = [];
  const normals = [];
  const colors = [];
  const visit = (nodeIndex, parent, depth) => {
    const node = json.nodes?.[nodeIndex];
    if (!node || depth > 64) return;
    const local = node.matrix ? new Float32Array(node.matrix) : fromTrs(node.translation, node.rotation, node.scale);
    const world = multiply(parent, local);
    const mesh = node.mesh !== undefined ? json.meshes?.[node.mesh] : undefined;
    for (const p of mesh?.primitives ?? []) {
      if ((p.mode ?? 4) !== 4 || p.attributes?.POSITION === undefined) continue;
      const pos = readAccessor(json, buffers, p.attributes.POSITION);
      const nor = p.attributes.NORMAL !== undefined ? readAccessor(json, buffers, p.attributes.NORMAL) : null;
      const colAccessor = p.attributes.COLOR_0;
      const col = colAccessor !== undefined ? readAccessor(json, buffers, colAccessor) : null;
      const colSize = colAccessor !== undefined ? COMPONENTS[json.accessors[colAccessor].type] : 3;
      const base = json.materials?.[p.material]?.pbrMetallicRoughness?.baseColorFactor ?? [0.8, 0.8, 0.8, 1];
      const count = pos.length / 3;
      const idx = p.indices !== undefined ? readAccessor(json, buffers, p.indices) : Array.from({ length: count }, (_, i) => i);
      for (let t = 0; t + 2 < idx.length; t += 3) {
        const tri = [idx[t], idx[t + 1], idx[t + 2]];
        if (tri.some((v) => v >= count)) throw new ModelError('An index points past the vertices.');
        const world3 = tri.map((v) => transformPoint(world, pos[v * 3], pos[v * 3 + 1], pos[v * 3 + 2]));
        let face = null;
        if (!nor) {
          const [a, b, c] = world3;
          const u = [b[0] - a[0], b[1] - a[1], b[2] - a[2]];
          const w = [c[0] - a[0], c[1] - a[1], c[2] - a[2]];
          face = [u[1] * w[2] - u[2] * w[1], u[2] * w[0] - u[0] * w[2], u[0] * w[1] - u[1] * w[0]];
        }
        tri.forEach((v, k) => {
          positions.push(...world3[k]);
          normals.push(...(nor ? transformDir(world, nor[v * 3], nor[v * 3 + 1], nor[v * 3 + 2]) : face));
          const c = col ? [col[v * colSize], col[v * colSize + 1], col[v * colSize + 2]] : [1, 1, 1];
          colors.push(c[0] * base[0], c[1] * base[1], c[2] * base[2]);
        });
      }
    }
    for (const child of node.children ?? []) visit(child, world, depth + 1);
  };
  const scene = json.scenes?.[json.scene ?? 0];
  const roots = scene?.nodes ?? (json.nodes ?? []).map((_, i) => i);
  for (const r of roots) visit(r, identity(), 0);
  if (!positions.length) throw new ModelError('The model has no triangles to show.');
  return { positions: new Float32Array(positions), normals: new Float32Array(normals), colors: new Float32Array(colors), triangles: positions.length / 9 };
}

const VERTEX = `
attribute vec3 aPosition; attribute vec3 aNormal; attribute vec3 aColor;
uniform mat4 uModelView; uniform mat4 uProjection;
varying vec3 vNormal; varying vec3 vColor; varying vec3 vView;
void main() {
  vec4 p = uModelView * vec4(aPosition, 1.0);
  vNormal = mat3(uModelView) * aNormal; vColor = aColor; vView = -p.xyz;
  gl_Position = uProjection * p;
}`;
const FRAGMENT = `
precision mediump float;
varying vec3 vNormal; varying vec3 vColor; varying vec3 vView;
void main() {
  vec3 n = normalize(vNormal); if (!gl_FrontFacing) n = -n;
  vec3 l = normalize(vec3(0.4, 0.7, 0.6));
  float diffuse = max(dot(n, l), 0.0);
  float spec = pow(max(dot(n, normalize(l + normalize(vView))), 0.0), 32.0) * 0.25;
  vec3 linear = vColor * (0.25 + 0.75 * diffuse) + vec3(spec);
  gl_FragColor = vec4(pow(linear, vec3(1.0 / 2.2)), 1.0);
}`;

function compile(gl, type, source) {
  const s = gl.createShader(type);
  gl.shaderSource(s, source);
  gl.compileShader(s);
  if (!gl.getShaderParameter(s, gl.COMPILE_STATUS)) throw new ModelError(`WebGL could not compile a shader: ${gl.getShaderInfoLog(s)}`);
  return s;
}

/**
 * Shows the model at `url` in `canvas` and makes it turnable. Resolves once the first frame is drawn (the canvas then
 * has `data-drawn="true"`); rejects with a ModelError the page can show.
 * @param {HTMLCanvasElement} canvas
 * @param {string} url
 * @param {AbortSignal} [signal]
 */
export async function showModel(canvas, url, signal) {
  const res = await fetch(url, { signal });
  if (!res.ok) throw new ModelError(`The model file could not be loaded (${res.status}).`);
  const { json, bin } = parseGltfContainer(await res.arrayBuffer());
  const buffers = await loadBuffers(json, bin, url);
  const mesh = flattenScene(json, buffers);

  const gl = canvas.getContext('webgl', { preserveDrawingBuffer: true, antialias: true }) ?? canvas.getContext('experimental-webgl', { preserveDrawingBuffer: true });
  if (!gl) throw new ModelError('This browser cannot show 3D (WebGL is off). Download the file instead.');
  const program = gl.createProgram();
  gl.attachShader(program, compile(gl, gl.VERTEX_SHADER, VERTEX));
  gl.attachShader(program, compile(gl, gl.FRAGMENT_SHADER, FRAGMENT));
  gl.linkProgram(program);
  if (!gl.getProgramParameter(program, gl.LINK_STATUS)) throw new ModelError('WebGL could not link the viewer.');
  gl.useProgram(program);
  for (const [name, data] of [['aPosition', mesh.positions], ['aNormal', mesh.normals], ['aColor', mesh.colors]]) {
    const buffer = gl.createBuffer();
    gl.bindBuffer(gl.ARRAY_BUFFER, buffer);
    gl.bufferData(gl.ARRAY_BUFFER, data, gl.STATIC_DRAW);
    const loc = gl.getAttribLocation(program, name);
    gl.enableVertexAttribArray(loc);
    gl.vertexAttribPointer(loc, 3, gl.FLOAT, false, 0, 0);
  }
  // Centre the model and fit it into view.
  const min = [Infinity, Infinity, Infinity];
  const max = [-Infinity, -Infinity, -Infinity];
  for (let i = 0; i < mesh.positions.length; i++) {
    min[i % 3] = Math.min(min[i % 3], mesh.positions[i]);
    max[i % 3] = Math.max(max[i % 3], mesh.positions[i]);
  }
  const center = min.map((v, i) => (v + max[i]) / 2);
  const radius = Math.max(1e-6, Math.hypot(max[0] - min[0], max[1] - min[1], max[2] - min[2]) / 2);
  const state = { yaw: 0.6, pitch: 0.35, distance: 2.8 };
  const uModelView = gl.getUniformLocation(program, 'uModelView');
  const uProjection = gl.getUniformLocation(program, 'uProjection');
  gl.enable(gl.DEPTH_TEST);

  const draw = () => {
    const ratio = window.devicePixelRatio || 1;
    const width = Math.max(1, Math.round(canvas.clientWidth * ratio));
    const height = Math.max(1, Math.round(canvas.clientHeight * ratio));
    if (canvas.width !== width || canvas.height !== height) {
      canvas.width = width;
      canvas.height = height;
    }
    gl.viewport(0, 0, width, height);
    gl.clearColor(0.95, 0.96, 0.98, 1);
    gl.clear(gl.COLOR_BUFFER_BIT | gl.DEPTH_BUFFER_BIT);
    let mv = translation(0, 0, -state.distance);
    mv = multiply(mv, rotationX(state.pitch));
    mv = multiply(mv, rotationY(state.yaw));
    const s = 1 / radius;
    mv = multiply(mv, new Float32Array([s, 0, 0, 0, 0, s, 0, 0, 0, 0, s, 0, -center[0] * s, -center[1] * s, -center[2] * s, 1]));
    gl.uniformMatrix4fv(uModelView, false, mv);
    gl.uniformMatrix4fv(uProjection, false, perspective(Math.PI / 4, width / height, 0.05, 100));
    gl.drawArrays(gl.TRIANGLES, 0, mesh.triangles * 3);
    canvas.dataset.drawn = 'true';
  };
  let frame = 0;
  const redraw = () => {
    if (!frame) frame = requestAnimationFrame(() => {
      frame = 0;
      draw();
    });
  };
  const turn = (dyaw, dpitch) => {
    state.yaw += dyaw;
    state.pitch = Math.max(-1.5, Math.min(1.5, state.pitch + dpitch));
    redraw();
  };
  const zoom = (factor) => {
    state.distance = Math.max(1.2, Math.min(12, state.distance * factor));
    redraw();
  };
  let drag = null;
  canvas.addEventListener('pointerdown', (e) => {
    drag = { x: e.clientX, y: e.clientY };
    canvas.setPointerCapture(e.pointerId);
  });
  canvas.addEventListener('pointermove', (e) => {
    if (!drag) return;
    turn((e.clientX - drag.x) * 0.01, (e.clientY - drag.y) * 0.01);
    drag = { x: e.clientX, y: e.clientY };
  });
  const end = () => {
    drag = null;
  };
  canvas.addEventListener('pointerup', end);
  canvas.addEventListener('pointercancel', end);
  canvas.addEventListener('wheel', (e) => {
    e.preventDefault();
    zoom(e.deltaY > 0 ? 1.1 : 1 / 1.1);
  }, { passive: false });
  canvas.addEventListener('keydown', (e) => {
    const step = 0.15;
    const keys = { ArrowLeft: () => turn(-step, 0), ArrowRight: () => turn(step, 0), ArrowUp: () => turn(0, -step), ArrowDown: () => turn(0, step), '+': () => zoom(1 / 1.1), '=': () => zoom(1 / 1.1), '-': () => zoom(1.1) };
    const act = keys[e.key];
    if (act) {
      e.preventDefault();
      act();
    }
  });
  if (typeof ResizeObserver === 'function') new ResizeObserver(redraw).observe(canvas);
  draw();
  return { triangles: mesh.triangles };
}
