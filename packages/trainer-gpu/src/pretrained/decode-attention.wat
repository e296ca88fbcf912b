(module
  ;; The tfjs-wasm backend's heap: every pointer below is a byte offset into it.
  (import "env" "memory" (memory 0))

  ;; scores[b,h,t] = scale * q[b,h,:].k[b,h/g,t,:] + bias[b*biasStride + (h mod Q)*biasQStride + t]
  ;; q [B,H,dh], k [B,Hkv,L,dh], scores [B,H,L]; dh a multiple of 4. A prefill's T queries per head are
  ;; H*T "heads" here (Q = T), each with its own causal bias row (biasQStride = L).
  (func (export "scores")
    (param $q i32) (param $k i32) (param $bias i32) (param $out i32)
    (param $B i32) (param $H i32) (param $Hkv i32) (param $L i32) (param $dh i32)
    (param $biasStride i32) (param $Q i32) (param $biasQStride i32) (param $scale f32)
    (local $b i32) (local $h i32) (local $t i32) (local $g i32)
    (local $qp i32) (local $qend i32) (local $kp i32) (local $qi i32) (local $ki i32)
    (local $bp i32) (local $op i32) (local $acc v128) (local $rowBytes i32)
    (local.set $g (i32.div_u (local.get $H) (local.get $Hkv)))
    (local.set $rowBytes (i32.shl (local.get $dh) (i32.const 2)))
    (local.set $op (local.get $out))
    (local.set $b (i32.const 0))
    (block $bdone (loop $bloop
      (br_if $bdone (i32.ge_u (local.get $b) (local.get $B)))
      (local.set $h (i32.const 0))
      (block $hdone (loop $hloop
        (br_if $hdone (i32.ge_u (local.get $h) (local.get $H)))
        (local.set $bp (i32.add (local.get $bias)
          (i32.shl
            (i32.add (i32.mul (local.get $b) (local.get $biasStride))
              (i32.mul (i32.rem_u (local.get $h) (local.get $Q)) (local.get $biasQStride)))
            (i32.const 2))))
        (local.set $qp (i32.add (local.get $q)
          (i32.mul (i32.add (i32.mul (local.get $b) (local.get $H)) (local.get $h)) (local.get $rowBytes))))
        (local.set $qend (i32.add (local.get $qp) (local.get $rowBytes)))
        (local.set $kp (i32.add (local.get $k)
          (i32.mul
            (i32.mul (i32.add (i32.mul (local.get $b) (local.get $Hkv)) (i32.div_u (local.get $h) (local.get $g)))
              (local.get $L))
            (local.get $rowBytes))))
        (local.set $t (i32.const 0))
        (block $tdone (loop $tloop
          (br_if $tdone (i32.ge_u (local.get $t) (local.get $L)))
          (local.set $acc (v128.const f32x4 0 0 0 0))
          (local.set $qi (local.get $qp))
          (local.set $ki (local.get $kp))
          (loop $iloop
            (local.set $acc (f32x4.add (local.get $acc)
              (f32x4.mul (v128.load (local.get $qi)) (v128.load (local.get $ki)))))
            (local.set $qi (i32.add (local.get $qi) (i32.const 16)))
            (local.set $ki (i32.add (local.get $ki) (i32.const 16)))
            (br_if $iloop (i32.lt_u (local.get $qi) (local.get $qend))))
          (f32.store (local.get $op)
            (f32.add
              (f32.mul (local.get $scale)
                (f32.add
                  (f32.add (f32x4.extract_lane 0 (local.get $acc)) (f32x4.extract_lane 1 (local.get $acc)))
                  (f32.add (f32x4.extract_lane 2 (local.get $acc)) (f32x4.extract_lane 3 (local.get $acc)))))
              (f32.load (i32.add (local.get $bp) (i32.shl (local.get $t) (i32.const 2))))))
          (local.set $op (i32.add (local.get $op) (i32.const 4)))
          (local.set $kp (i32.add (local.get $kp) (local.get $rowBytes)))
          (local.set $t (i32.add (local.get $t) (i32.const 1)))
          (br $tloop)))
        (local.set $h (i32.add (local.get $h) (i32.const 1)))
        (br $hloop)))
      (local.set $b (i32.add (local.get $b) (i32.const 1)))
      (br $bloop))))

  ;; out[b,h,:] = sum_t p[b,h,t] * v[b,h/g,t,:]; p [B,H,L], v [B,Hkv,L,dh], out [B,H,dh]; dh a multiple of 4.
  (func (export "weighted")
    (param $p i32) (param $v i32) (param $out i32)
    (param $B i32) (param $H i32) (param $Hkv i32) (param $L i32) (param $dh i32)
    (local $b i32) (local $h i32) (local $t i32) (local $g i32) (local $rowBytes i32)
    (local $pp i32) (local $pend i32) (local $vp i32) (local $op i32) (local $oend i32)
    (local $pi i32) (local $vi i32) (local $acc v128)
    (local.set $g (i32.div_u (local.get $H) (local.get $Hkv)))
    (local.set $rowBytes (i32.shl (local.get $dh) (i32.const 2)))
    (local.set $op (local.get $out))
    (local.set $pp (local.get $p))
    (local.set $b (i32.const 0))
    (block $bdone (loop $bloop
      (br_if $bdone (i32.ge_u (local.get $b) (local.get $B)))
      (local.set $h (i32.const 0))
      (block $hdone (loop $hloop
        (br_if $hdone (i32.ge_u (local.get $h) (local.get $H)))
        (local.set $pend (i32.add (local.get $pp) (i32.shl (local.get $L) (i32.const 2))))
        (local.set $vp (i32.add (local.get $v)
          (i32.mul
            (i32.mul (i32.add (i32.mul (local.get $b) (local.get $Hkv)) (i32.div_u (local.get $h) (local.get $g)))
              (local.get $L))
            (local.get $rowBytes))))
        (local.set $oend (i32.add (local.get $op) (local.get $rowBytes)))
        (loop $iloop
          (local.set $acc (v128.const f32x4 0 0 0 0))
          (local.set $pi (local.get $pp))
          (local.set $vi (local.get $vp))
          (loop $tloop
            (local.set $acc (f32x4.add (local.get $acc)
              (f32x4.mul (f32x4.splat (f32.load (local.get $pi))) (v128.load (local.get $vi)))))
            (local.set $pi (i32.add (local.get $pi) (i32.const 4)))
            (local.set $vi (i32.add (local.get $vi) (local.get $rowBytes)))
            (br_if $tloop (i32.lt_u (local.get $pi) (local.get $pend))))
          (v128.store (local.get $op) (local.get $acc))
          (local.set $op (i32.add (local.get $op) (i32.const 16)))
          (local.set $vp (i32.add (local.get $vp) (i32.const 16)))
          (br_if $iloop (i32.lt_u (local.get $op) (local.get $oend))))
        (local.set $pp (local.get $pend))
        (local.set $h (i32.add (local.get $h) (i32.const 1)))
        (br $hloop)))
      (local.set $b (i32.add (local.get $b) (i32.const 1)))
      (br $bloop))))
)
