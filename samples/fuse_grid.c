// A time-stepped grid solver written the way NPB's C port writes its
// OpenACC: arrays u[m][k][j][i], `parallel loop gang` over k with `loop
// worker` over j and `loop vector` over i, a sweep over m inside, bounds
// written `<= n-1` in one construct and `< n` in the next, and a scalar set
// before a construct that the next one loops over. R1's neighbours:
//   set/copy   fusable over k, j, i (constant first subscripts, same ranges)
//   copy/edge  fusable over k alone (j partitioned differently)
//   (`i = 1;` between edge and side: not neighbours)
//   side/sweep not fusable: the first reads the i set before it, the second loops over i
//   sweep/back not fusable: the second reads q[m][k][j+1][i], another iteration
// Usage: fuse_grid [N] [STEPS]
#include <stdio.h>
#include <stdlib.h>

#define NM 5

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 16;
  int steps = argc > 2 ? atoi(argv[2]) : 100;
  int i, j, k, m, step;
  double t;
  size_t cells = (size_t)n * n * n;
  double (*u)[n][n][n] = malloc(NM * cells * sizeof(double));
  double (*r)[n][n][n] = malloc(NM * cells * sizeof(double));
  double (*q)[n][n][n] = malloc(NM * cells * sizeof(double));
  double (*rho)[n][n] = malloc(cells * sizeof(double));
  double (*us)[n][n] = malloc(cells * sizeof(double));
  for (m = 0; m < NM; m++)
    for (k = 0; k < n; k++)
      for (j = 0; j < n; j++)
        for (i = 0; i < n; i++) {
          u[m][k][j][i] = 1.0 + 0.001 * (m + k + 2 * j + 3 * i);
          q[m][k][j][i] = 0.0;
        }

#pragma acc data copyin(u[0:NM][0:n][0:n][0:n]) create(r[0:NM][0:n][0:n][0:n], rho[0:n][0:n][0:n], us[0:n][0:n][0:n]) copy(q[0:NM][0:n][0:n][0:n])
  for (step = 0; step < steps; step++) {
#pragma acc parallel loop gang num_gangs(n) num_workers(4) vector_length(32)
    for (k = 0; k <= n-1; k++) {
#pragma acc loop worker
      for (j = 0; j <= n-1; j++) {
#pragma acc loop vector
        for (i = 0; i <= n-1; i++) {
          t = 1.0/u[0][k][j][i];
          rho[k][j][i] = t;
          us[k][j][i] = u[1][k][j][i] * t;
        }
      }
    }
#pragma acc parallel loop gang num_gangs(n) num_workers(4) vector_length(32)
    for (k = 0; k < n; k++) {
#pragma acc loop worker
      for (j = 0; j < n; j++) {
#pragma acc loop vector
        for (i = 0; i < n; i++) {
          for (m = 0; m < NM; m++) {
            r[m][k][j][i] = u[m][k][j][i] * rho[k][j][i];
          }
        }
      }
    }
#pragma acc parallel loop gang num_gangs(n) num_workers(4) vector_length(32)
    for (k = 0; k < n; k++) {
#pragma acc loop worker vector
      for (j = 0; j < n; j++) {
        r[2][k][j][0] = us[k][j][0];
        r[2][k][j][n-1] = us[k][j][n-1];
      }
    }
    i = 1;
#pragma acc parallel loop gang num_gangs(n) num_workers(4) vector_length(32)
    for (k = 0; k < n; k++) {
#pragma acc loop worker vector
      for (j = 0; j < n; j++) {
        q[0][k][j][i] = q[0][k][j][i] + r[0][k][j][i];
      }
    }
#pragma acc parallel loop gang num_gangs(n) num_workers(4) vector_length(32)
    for (k = 0; k < n; k++) {
#pragma acc loop worker vector
      for (j = 0; j < n - 1; j++) {
        for (i = 2; i < n; i++) {
          for (m = 0; m < NM; m++) {
            q[m][k][j][i] = 0.5 * q[m][k][j][i] + r[m][k][j+1][i];
          }
        }
      }
    }
#pragma acc parallel loop gang num_gangs(n) num_workers(4) vector_length(32)
    for (k = 0; k < n; k++) {
#pragma acc loop worker vector
      for (j = 0; j < n - 1; j++) {
        for (i = 2; i < n; i++) {
          for (m = 0; m < NM; m++) {
            r[m][k][j][i] = 0.25 * q[m][k][j+1][i];
          }
        }
      }
    }
  }

  double sum = 0.0;
  for (m = 0; m < NM; m++)
    for (k = 0; k < n; k++)
      for (j = 0; j < n; j++)
        for (i = 0; i < n; i++)
          sum += q[m][k][j][i];
  printf("checksum: %.10e\n", sum);
  free(u);
  free(r);
  free(q);
  free(rho);
  free(us);
  return 0;
}
