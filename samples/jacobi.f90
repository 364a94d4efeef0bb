! jacobi.f90 - Jacobi solver for the Poisson equation with a data region (a GOOD program).
!
! Solves -laplace(u) = f on the unit square with u = 0 on the edges and
! f = 2*pi**2 * sin(pi*x) * sin(pi*y), whose exact solution is
! sin(pi*x) * sin(pi*y). The device work sits in a module subroutine,
! sweep(), called twice per iteration with the roles of u and unew swapped,
! so no copy-back kernel is needed. One `data` region in the main program
! keeps f, u and unew on the device for the whole solve; sweep() declares
! them `present`. The only array transfers are f and u going up once and
! u coming back once. Jacobi needs on the order of N**2 sweeps to converge,
! so at the default size the run measures the cost of a sweep and the
! printed distance from the exact solution stays large; small N with many
! iterations shows it shrink.
!
! Usage: jacobi_f90 [N [ITERS [TOL]]]     defaults: 2048 100 1e-12
!        one iteration = two sweeps; stops early when a sweep changes no
!        value by more than TOL.
!
! Expected profile (GCC 12 / libgomp; I = iterations done, A = 8*(N+2)**2 bytes):
!   line 100: `!$acc data copyin(f) copy(u) create(unew)`
!     reached once: uploads of f and u and, at line 112: `!$acc end data`,
!     one download of u (A bytes each); unew is only allocated.
!   line 101: `!$acc parallel loop collapse(2) present(u, unew) ! boundary`
!     reached once (1 launch): gives unew the edge values on the device
!     instead of uploading a second array.
!   line 107: `do while (iter < iters .and. change > tol)` host loop, I iterations
!   line 53: `!$acc parallel loop collapse(2) present(f, u, unew) reduction(max:biggest)`
!     in subroutine sweep, reached 2*I times (from the two calls at
!     line 108: `call sweep(n, h2, f, u, unew, change)` and
!     line 109: `call sweep(n, h2, f, unew, u, change)`): 2*I launches; only the
!     8-byte reduction variable moves.
!   Total array traffic 3*A bytes whatever I is; no transfer finding expected.
!
! Output: "checksum: <sum of the inner points of u>", then "reference: match"
! when u equals a plain CPU computation of the same sweeps (relative 1e-9),
! else "reference: MISMATCH" and exit status 1. With SAMPLE_SKIP_REFERENCE set
! (timing runs) it prints "reference: skipped" instead of computing it.
module jacobi_kernels
  implicit none
  integer, parameter :: dp = kind(1.0d0)
contains

  ! One Jacobi sweep on the device: unew from u; change = largest |unew - u|.
  subroutine sweep(n, h2, f, u, unew, change)
    integer, intent(in) :: n
    real(dp), intent(in) :: h2
    real(dp), intent(in) :: f(0:n+1, 0:n+1), u(0:n+1, 0:n+1)
    real(dp), intent(inout) :: unew(0:n+1, 0:n+1)
    real(dp), intent(out) :: change
    real(dp) :: biggest
    integer :: i, j
    biggest = 0.0_dp
    !$acc parallel loop collapse(2) present(f, u, unew) reduction(max:biggest)
    do j = 1, n
      do i = 1, n
        unew(i, j) = 0.25_dp * (u(i-1, j) + u(i+1, j) + u(i, j-1) + u(i, j+1) + h2 * f(i, j))
        biggest = max(biggest, abs(unew(i, j) - u(i, j)))
      end do
    end do
    change = biggest
  end subroutine sweep

end module jacobi_kernels

program jacobi
  use jacobi_kernels
  implicit none
  real(dp), parameter :: pi = 3.14159265358979323846_dp
  real(dp), allocatable :: f(:,:), u(:,:), unew(:,:), ref(:,:), refnew(:,:)
  integer :: n, iters, iter, i, j, k, skip
  integer(8) :: t0, t1, rate
  real(dp) :: tol, h, h2, change, x, y, err
  character(len=32) :: buf

  n = int_arg(1, 2048)
  iters = int_arg(2, 100)
  tol = real_arg(3, 1.0e-12_dp)
  if (n < 1 .or. iters < 0 .or. .not. (tol >= 0.0_dp)) then
    write(*, '(a)') 'usage: jacobi_f90 [N>=1 [ITERS>=0 [TOL>=0]]]'
    stop 2
  end if
  write(*, '(a,i0,a,i0,a,i0,a,es9.2)') 'jacobi_f90: ', n, ' x ', n, &
      ' inner points, at most ', iters, ' iterations (2 sweeps each), tolerance ', tol

  h = 1.0_dp / (n + 1)
  h2 = h * h
  allocate(f(0:n+1, 0:n+1), u(0:n+1, 0:n+1), unew(0:n+1, 0:n+1))
  do j = 0, n + 1
    do i = 0, n + 1
      x = i * h
      y = j * h
      f(i, j) = 2.0_dp * pi * pi * sin(pi * x) * sin(pi * y)
    end do
  end do
  u = 0.0_dp

  call system_clock(t0, rate)
  iter = 0
  change = huge(1.0_dp)
  !$acc data copyin(f) copy(u) create(unew)
  !$acc parallel loop collapse(2) present(u, unew) ! boundary
  do j = 0, n + 1
    do i = 0, n + 1
      unew(i, j) = u(i, j)
    end do
  end do
  do while (iter < iters .and. change > tol)
    call sweep(n, h2, f, u, unew, change)
    call sweep(n, h2, f, unew, u, change)
    iter = iter + 1
  end do
  !$acc end data
  call system_clock(t1)
  write(buf, '(f12.3)') real(t1 - t0, dp) / real(rate, dp)
  write(*, '(3a)') 'time: ', trim(adjustl(buf)), ' s'
  if (iter == 0) change = 0.0_dp
  err = 0.0_dp
  do j = 1, n
    do i = 1, n
      err = max(err, abs(u(i, j) - sin(pi * i * h) * sin(pi * j * h)))
    end do
  end do
  write(*, '(a,i0,a,es13.6,a,es13.6)') 'iterations: ', iter, ', last change: ', change, &
      ', max error against the exact solution: ', err

  write(buf, '(es20.12)') sum(u(1:n, 1:n))
  write(*, '(2a)') 'checksum: ', trim(adjustl(buf))

  ! Timing runs (bench/overhead.sh) skip the CPU reference.
  call get_environment_variable('SAMPLE_SKIP_REFERENCE', status=skip)
  if (skip == 0) then
    write(*, '(a)') 'reference: skipped'
    stop
  end if
  ! Plain CPU reference: the same 2*iter sweeps.
  allocate(ref(0:n+1, 0:n+1), refnew(0:n+1, 0:n+1))
  ref = 0.0_dp
  refnew = 0.0_dp
  do k = 1, 2 * iter
    do j = 1, n
      do i = 1, n
        refnew(i, j) = 0.25_dp * (ref(i-1, j) + ref(i+1, j) + ref(i, j-1) + ref(i, j+1) &
                                  + h2 * f(i, j))
      end do
    end do
    ref(1:n, 1:n) = refnew(1:n, 1:n)
  end do
  write(*, '(a,es10.3)') 'max difference: ', maxval(abs(u - ref))
  ! Relative to the largest value of the solution; NaN never compares as close.
  if (all(abs(u - ref) <= 1.0e-9_dp * max(maxval(abs(ref)), 1.0e-300_dp))) then
    write(*, '(a)') 'reference: match'
  else
    write(*, '(a)') 'reference: MISMATCH'
    stop 1
  end if

contains

  integer function int_arg(pos, def)
    integer, intent(in) :: pos, def
    character(len=64) :: s
    integer :: stat
    int_arg = def
    if (command_argument_count() < pos) return
    call get_command_argument(pos, s)
    read(s, *, iostat=stat) int_arg
    if (stat /= 0) then
      write(*, '(3a)') 'bad integer argument: ', trim(s)
      stop 2
    end if
  end function int_arg

  real(dp) function real_arg(pos, def)
    integer, intent(in) :: pos
    real(dp), intent(in) :: def
    character(len=64) :: s
    integer :: stat
    real_arg = def
    if (command_argument_count() < pos) return
    call get_command_argument(pos, s)
    read(s, *, iostat=stat) real_arg
    if (stat /= 0) then
      write(*, '(3a)') 'bad number argument: ', trim(s)
      stop 2
    end if
  end function real_arg

end program jacobi
