// Part of attention.wgsl, rope.wgsl, decode_megakernel.wgsl and _matmul_fusions.wgsl
// (#include _kv_texture): access to a KV cache held in textures `cacheK` / `cacheV`
// (core/ops/kv_write.ts KvTexture): f32 caches in r32float, float f at texel (f % 4096,
// f / 4096); q8 caches (Q8) in r32uint, word w there.
// The includer defines kvBase4(): where the addressed region starts, in 16-byte units (a
// layer's region, or 0 when rows carry it).

#if Q8
// q8 caches: u32 words (4 int8 codes, or a row's f32 scale) in r32uint textures, word w of the
// buffer layout (the region from word 4 kvBase4()) at texel (w % 4096, w / 4096).
fn kvWord(w: u32) -> vec2<u32> {
  let f = 4u * kvBase4() + w;
  return vec2<u32>(f & 4095u, f >> 12u);
}
fn kwK(w: u32) -> u32 { return textureLoad(cacheK, kvWord(w)).x; }
fn kwV(w: u32) -> u32 { return textureLoad(cacheV, kvWord(w)).x; }
fn swK(w: u32, v: u32) { textureStore(cacheK, kvWord(w), vec4<u32>(v)); }
fn swV(w: u32, v: u32) { textureStore(cacheV, kvWord(w), vec4<u32>(v)); }
#else
// Texel of vec4 d of the cache row at vec4 index r.
fn kvAt(r: u32, d: u32) -> vec2<u32> {
  let f = 4u * (kvBase4() + r + d);
  return vec2<u32>(f & 4095u, f >> 12u);
}
fn ldK(r: u32, d: u32) -> vec4<f32> {
  let c = kvAt(r, d);
  return vec4<f32>(textureLoad(cacheK, c).x, textureLoad(cacheK, c + vec2<u32>(1u, 0u)).x, textureLoad(cacheK, c + vec2<u32>(2u, 0u)).x, textureLoad(cacheK, c + vec2<u32>(3u, 0u)).x);
}
fn ldV(r: u32, d: u32) -> vec4<f32> {
  let c = kvAt(r, d);
  return vec4<f32>(textureLoad(cacheV, c).x, textureLoad(cacheV, c + vec2<u32>(1u, 0u)).x, textureLoad(cacheV, c + vec2<u32>(2u, 0u)).x, textureLoad(cacheV, c + vec2<u32>(3u, 0u)).x);
}
// Stores v as vec4 d of the K (stK) or V (stV) row at vec4 index r.
fn stK(r: u32, d: u32, v: vec4<f32>) {
  let c = kvAt(r, d);
  for (var i = 0u; i < 4u; i++) { textureStore(cacheK, c + vec2<u32>(i, 0u), vec4<f32>(v[i])); }
}
fn stV(r: u32, d: u32, v: vec4<f32>) {
  let c = kvAt(r, d);
  for (var i = 0u; i < 4u; i++) { textureStore(cacheV, c + vec2<u32>(i, 0u), vec4<f32>(v[i])); }
}
// Stores k and v as vec4 d of the K and V rows at vec4 index r.
fn stKV(r: u32, d: u32, k: vec4<f32>, v: vec4<f32>) {
  stK(r, d, k);
  stV(r, d, v);
}
#endif
