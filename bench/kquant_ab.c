/* bench/kquant_ab.c — two builds of gemv_kquant_avx2.c side by side in one process (symbols prefixed A_ and B_ by
 * bench/kquant-ab.sh), timed alternately on the same W (256 rows x 2048 columns, in L2) and the same activation:
 * nanoseconds per 256-element super-block, the minimum over 400 alternating trials of 20 matvecs each (on a shared
 * machine the minimum is the figure least moved by other processes), and whether the two builds' outputs are the
 * same bits. Not part of the tests. Run it through bench/kquant-ab.sh REV_A [REV_B]. */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kernels/avx2.h"
#include "kernels/quant.h"
#include "util/half.h"
#include "ab_util.h"
typedef void (*gemv)(const uint8_t*,size_t,int64_t,const void*,int64_t,float*);
#define D(v) void v##_tg_avx2_gemv_q4_k(const uint8_t*,size_t,int64_t,const void*,int64_t,float*); void v##_tg_avx2_gemv_q5_k(const uint8_t*,size_t,int64_t,const void*,int64_t,float*); void v##_tg_avx2_gemv_q6_k(const uint8_t*,size_t,int64_t,const void*,int64_t,float*);
D(A) D(B)
int main(int argc,char**argv){
  int rows=256, cols=2048; uint64_t s=1;
  struct {const char*n; gemv f[2]; int bb; int sc0, sc1;} ty[]={{"Q4_K",{A_tg_avx2_gemv_q4_k,B_tg_avx2_gemv_q4_k},144,0,2},{"Q5_K",{A_tg_avx2_gemv_q5_k,B_tg_avx2_gemv_q5_k},176,0,2},{"Q6_K",{A_tg_avx2_gemv_q6_k,B_tg_avx2_gemv_q6_k},210,208,-1}};
  float *x=malloc(cols*4), *y=malloc(rows*4); for(int i=0;i<cols;i++){s=s*6364136223846793005ull+1442695040888963407ull; x[i]=(float)((int)(s>>40)%1000)/1000.f;}
  tg_q8k_block *xk=malloc(sizeof(tg_q8k_block)*cols/256); tg_quantize_q8k(x,xk,cols);
  for(unsigned k=0;k<3;k++){
    size_t rb=(size_t)ty[k].bb*cols/256; uint8_t*w=malloc(rb*rows);
    for(size_t i=0;i<rb*rows;i++){s=s*6364136223846793005ull+1442695040888963407ull; w[i]=(uint8_t)(s>>33);}
    for(size_t b=0;b<rb*rows/ty[k].bb;b++){uint16_t h=tg_f32_to_f16(0.001f); memcpy(w+b*ty[k].bb+ty[k].sc0,&h,2); if(ty[k].sc1>=0) memcpy(w+b*ty[k].bb+ty[k].sc1,&h,2);}
    double best[2]={1e9,1e9}; double chk[2]={0,0};
    for(int tr=0;tr<400;tr++) for(int v=0;v<2;v++){double t0=ab_seconds(); for(int r=0;r<20;r++) ty[k].f[v](w,rb,rows,xk,cols,y); double t=(ab_seconds()-t0)/20; if(t<best[v])best[v]=t;
      if(tr==0) for(int i=0;i<rows;i++) chk[v]+=y[i]*(i%7+1);}
    printf("%s  A %.2f  B %.2f ns/superblock  B/A speed %.2fx  %s\n",ty[k].n,best[0]*1e9/(rows*cols/256.0),best[1]*1e9/(rows*cols/256.0),best[0]/best[1], chk[0]==chk[1]?"same":"DIFFERENT");
    free(w);}
  return 0;}
