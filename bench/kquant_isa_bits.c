/* bench/kquant_isa_bits.c — a hash of every K-quant decode and prefill kernel's output bits (gemv_kquant_avx2.c) on
 * fixed random blocks, row counts 1..37 (pairs and the odd row), 7 prefill tokens; and whether prefill equals
 * decode. bench/kquant-isa-bits.sh builds it for each instruction-set path (AVX2 only, + GFNI, + AVX-512VL,
 * native) and compares the hashes: the integer sums are exact, so every path must give the same bits. Not part of
 * the tests (it needs several builds). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/avx2.h"
#include "kernels/quant.h"
#include "util/half.h"
typedef void (*gemv)(const uint8_t*,size_t,int64_t,const void*,int64_t,float*);
typedef void (*gemm)(const uint8_t*,size_t,int64_t,const tg_q8k_block*,int64_t,int64_t,float*,size_t);
int main(void) { int rows=37, cols=1024; uint64_t s=7; unsigned long long h=1469598103934665603ull;
 struct {gemv f; gemm g; int bb, sc0, sc1;} ty[]={{tg_avx2_gemv_q2_k,tg_avx2_gemm_q8k_q2_k,84,80,82},{tg_avx2_gemv_q3_k,tg_avx2_gemm_q8k_q3_k,110,108,-1},{tg_avx2_gemv_q4_k,tg_avx2_gemm_q8k_q4_k,144,0,2},{tg_avx2_gemv_q5_k,tg_avx2_gemm_q8k_q5_k,176,0,2},{tg_avx2_gemv_q6_k,tg_avx2_gemm_q8k_q6_k,210,208,-1}};
 int nt=7; float *x=malloc(cols*nt*4), *y=malloc(rows*nt*4); for(int i=0;i<cols*nt;i++){s=s*6364136223846793005ull+1442695040888963407ull; x[i]=(float)((int)(s>>40)%2001-1000)/1000.f;}
 tg_q8k_block *xk=malloc(sizeof(tg_q8k_block)*cols/256*nt); for(int t=0;t<nt;t++) tg_quantize_q8k(x+t*cols,xk+t*cols/256,cols);
 for(int k=0;k<5;k++){ size_t rb=(size_t)ty[k].bb*cols/256; uint8_t*w=malloc(rb*rows);
  for(size_t i=0;i<rb*rows;i++){s=s*6364136223846793005ull+1442695040888963407ull; w[i]=(uint8_t)(s>>33);}
  for(size_t b=0;b<rb*rows/ty[k].bb;b++){uint16_t hh=tg_f32_to_f16(0.001f*(float)(b%7+1)); memcpy(w+b*ty[k].bb+ty[k].sc0,&hh,2); if(ty[k].sc1>=0) memcpy(w+b*ty[k].bb+ty[k].sc1,&hh,2);}
  for(int nr=1;nr<=rows;nr+=nr<4?1:11){ ty[k].f(w,rb,nr,xk,cols,y); for(int i=0;i<nr*4;i++) h=(h^((unsigned char*)y)[i])*1099511628211ull; }
  ty[k].g(w,rb,rows,xk,cols/256,nt,y,rows); for(int i=0;i<rows*nt*4;i++) h=(h^((unsigned char*)y)[i])*1099511628211ull;
  /* prefill == decode */ float *yd=malloc(rows*4); int bad=0; for(int t=0;t<nt;t++){ ty[k].f(w,rb,rows,xk+t*cols/256,cols,yd); bad+=memcmp(yd,y+t*rows,rows*4)!=0; }
  printf("type %d hash %016llx prefill-vs-decode mismatches %d\n",k,h,bad); free(w); free(yd);}
 return 0; }
