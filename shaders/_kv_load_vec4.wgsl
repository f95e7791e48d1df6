// Part of attention_splitk.wgsl and attention_prefill.wgsl (#include _kv_load_vec4): element i
// (a vec4 of one K or V row) of the KV cache buffers as f32. KV = f32 | f16 (packed halves,
// two u32 words a vec4, _kv_half) | f16n (native shader-f16 vec4<f16>); the includer binds cacheK / cacheV.
#if KV == f16
#include _kv_half
#endif

fn ldK(i: u32) -> vec4<f32> {
#if KV == f16
  return unhalf4(cacheK[i]);
#else
  return vec4<f32>(cacheK[i]);
#endif
}

fn ldV(i: u32) -> vec4<f32> {
#if KV == f16
  return unhalf4(cacheV[i]);
#else
  return vec4<f32>(cacheV[i]);
#endif
}
