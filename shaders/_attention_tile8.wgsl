// Part of attention.wgsl (cpu variant) and decode_megakernel.wgsl (#include _attention_tile8):
// one tile of 8 keys of the online softmax, as statements inside the key loop. The includer
// has bound r0..r7 (cache rows of keys j..j+7, clamped to pos), j, pos, and GC-long arrays
// m, l (running max and sum), sa, sb (scratch) and cf; ldK / ldV (scK / scV with Q8).
// QREG: q and the accumulators in private arrays qr / acr [GC * HD4] (registers); else q is
// read from qkv at qBase and the accumulators live in out at oBase (attention.wgsl).
// Keys past `pos` re-read key `pos` (finite) and get weight 0.
    for (var g = 0u; g < GC; g++) {
      sa[g] = vec4<f32>(0.0);
      sb[g] = vec4<f32>(0.0);
    }
#if QREG
    for (var d = 0u; d < HD4; d++) {
#else
    for (var d = 0u; d < p.hd4; d++) {
#endif
      let k0 = ldK(r0, d);
      let k1 = ldK(r1, d);
      let k2 = ldK(r2, d);
      let k3 = ldK(r3, d);
      let k4 = ldK(r4, d);
      let k5 = ldK(r5, d);
      let k6 = ldK(r6, d);
      let k7 = ldK(r7, d);
      for (var g = 0u; g < GC; g++) {
#if QREG
        let qd = qr[g * HD4 + d];
#else
        let qd = qkv[qBase + g * p.hd4 + d];
#endif
        sa[g] += vec4<f32>(dot(qd, k0), dot(qd, k1), dot(qd, k2), dot(qd, k3));
        sb[g] += vec4<f32>(dot(qd, k4), dot(qd, k5), dot(qd, k6), dot(qd, k7));
      }
    }
#if Q8
    // Per-key scales: K folds into the score multiplier, V into the weights.
    let qa = p.qScale * vec4<f32>(scK(r0), scK(r1), scK(r2), scK(r3));
    let qb = p.qScale * vec4<f32>(scK(r4), scK(r5), scK(r6), scK(r7));
    let sva = vec4<f32>(scV(r0), scV(r1), scV(r2), scV(r3));
    let svb = vec4<f32>(scV(r4), scV(r5), scV(r6), scV(r7));
#else
    let qa = vec4<f32>(p.qScale);
    let qb = qa;
#endif
    let va = vec4<u32>(j, j + 1u, j + 2u, j + 3u) <= vec4<u32>(pos);
    let vb = vec4<u32>(j + 4u, j + 5u, j + 6u, j + 7u) <= vec4<u32>(pos);
    for (var g = 0u; g < GC; g++) {
      let xa = select(vec4<f32>(NEG), capped4(sa[g] * qa), va);
      let xb = select(vec4<f32>(NEG), capped4(sb[g] * qb), vb);
      let mx = max(xa, xb);
      let mt = max(m[g], max(max(mx.x, mx.y), max(mx.z, mx.w)));
      let corr = exp(m[g] - mt);
      let wa = exp(xa - mt);
      let wb = exp(xb - mt);
      let wsum = wa + wb;
      l[g] = l[g] * corr + (wsum.x + wsum.y + wsum.z + wsum.w);
      m[g] = mt;
      cf[g] = corr;
#if Q8
      sa[g] = wa * sva;
      sb[g] = wb * svb;
#else
      sa[g] = wa;
      sb[g] = wb;
#endif
    }
#if QREG
    for (var d = 0u; d < HD4; d++) {
#else
    for (var d = 0u; d < p.hd4; d++) {
#endif
      let v0 = ldV(r0, d);
      let v1 = ldV(r1, d);
      let v2 = ldV(r2, d);
      let v3 = ldV(r3, d);
      let v4 = ldV(r4, d);
      let v5 = ldV(r5, d);
      let v6 = ldV(r6, d);
      let v7 = ldV(r7, d);
      for (var g = 0u; g < GC; g++) {
        let wa = sa[g];
        let wb = sb[g];
#if QREG
        let o = g * HD4 + d;
        acr[o] = acr[o] * cf[g] + (wa.x * v0 + wa.y * v1 + wa.z * v2 + wa.w * v3) + (wb.x * v4 + wb.y * v5 + wb.z * v6 + wb.w * v7);
#else
        let o = oBase + g * p.hd4 + d;
        out[o] = out[o] * cf[g] + (wa.x * v0 + wa.y * v1 + wa.z * v2 + wa.w * v3) + (wb.x * v4 + wb.y * v5 + wb.z * v6 + wb.w * v7);
#endif
      }
    }
