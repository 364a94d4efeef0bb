! caller_loop.f90 - the kernel in a module subroutine, called from the time loop (the BAD variant).
!
! Fortran twin of caller_loop.c: heat_step() holds the compute construct with
! its own data clauses and the main program calls it twice per time step,
! with the roles of the grids swapped. The construct has no host loop around
! it in its subroutine, so the repetition comes from the caller: every call
! sends the whole grid up and brings the whole result back. A `data` region
! in the main program, around the time loop, with `present` in heat_step
! moves each grid once.
!
! Usage: caller_loop_f90 [NX [NY [STEPS]]]     defaults: 2048 2048 100
!
! Expected profile (GCC 12 / libgomp; S = STEPS, B = 8*NX*NY bytes):
!   line 37: `!$acc parallel loop collapse(2) copyin(u) copyout(unew)`
!     in subroutine heat_step, reached 2*S times (from the two calls at
!     line 77: `call heat_step(nx, ny, u, unew)` and
!     line 78: `call heat_step(nx, ny, unew, u)`):
!     2*S launches, 2*S uploads and 2*S downloads of B bytes.
!   line 76: `do step = 1, steps` host time loop, S iterations.
!   Findings to expect: D6 at the loop of line 76 (in the caller), proposing
!   `!$acc data copy(u, unew)` before it and `!$acc end data` after its
!   `end do`, and `present(u) present(unew)` in place of the clauses at
!   line 37: 4*S transfers become 4.
!
! Output: "checksum: <sum of the final grid>", then "reference: match" when
! the result equals a plain CPU computation (relative 1e-9), else
! "reference: MISMATCH" and exit status 1.
module heat_kernels
  implicit none
  integer, parameter :: dp = kind(1.0d0)
contains
  subroutine heat_step(nx, ny, u, unew)
    integer, intent(in) :: nx, ny
    real(dp), intent(in) :: u(ny, nx)
    real(dp), intent(out) :: unew(ny, nx)
    integer :: i, j
    !$acc parallel loop collapse(2) copyin(u) copyout(unew)
    do i = 1, nx
      do j = 1, ny
        if (i == 1 .or. j == 1 .or. i == nx .or. j == ny) then
          unew(j, i) = u(j, i)
        else
          unew(j, i) = u(j, i) + 0.2_dp * (u(j, i - 1) - 2.0_dp * u(j, i) + u(j, i + 1)) &
                               + 0.2_dp * (u(j - 1, i) - 2.0_dp * u(j, i) + u(j + 1, i))
        end if
      end do
    end do
  end subroutine heat_step
end module heat_kernels

program caller_loop
  use heat_kernels
  implicit none
  integer :: nx, ny, steps, step, i, j, s, bad
  real(dp), allocatable :: u(:, :), unew(:, :), a(:, :), b(:, :)
  real(dp) :: x, y, t1, scale, diff, d
  integer(8) :: c0, c1, rate

  nx = arg(1, 2048, 3)
  ny = arg(2, 2048, 3)
  steps = arg(3, 100, 0)
  allocate(u(ny, nx), unew(ny, nx), a(ny, nx), b(ny, nx))
  write (*, '(a, i0, a, i0, a, i0, a)') 'caller_loop_f90: ', nx, ' x ', ny, ' grid, ', steps, ' double steps'
  do i = 1, nx
    do j = 1, ny
      x = real(i - 1, dp) / (nx - 1) - 0.35_dp
      y = real(j - 1, dp) / (ny - 1) - 0.6_dp
      u(j, i) = 5.0_dp + 60.0_dp * exp(-(x * x + y * y) / 0.02_dp)
    end do
  end do
  a = u
  b = u
  unew = u

  call system_clock(c0, rate)
  do step = 1, steps
    call heat_step(nx, ny, u, unew)
    call heat_step(nx, ny, unew, u)
  end do
  call system_clock(c1)
  t1 = real(c1 - c0, dp) / real(rate, dp)
  write (*, '(a, f0.3, a)') 'time: ', t1, ' s'
  write (*, '(a, es19.12)') 'checksum: ', sum(u)

  do s = 1, 2 * steps
    do i = 2, nx - 1
      do j = 2, ny - 1
        b(j, i) = a(j, i) + 0.2_dp * (a(j, i - 1) - 2.0_dp * a(j, i) + a(j, i + 1)) &
                          + 0.2_dp * (a(j - 1, i) - 2.0_dp * a(j, i) + a(j + 1, i))
      end do
    end do
    a(2:ny - 1, 2:nx - 1) = b(2:ny - 1, 2:nx - 1)
  end do
  scale = maxval(abs(a))
  diff = 0
  bad = 0
  do i = 1, nx
    do j = 1, ny
      d = abs(u(j, i) - a(j, i))
      if (.not. (d <= 1e-9_dp * scale)) bad = bad + 1
      diff = max(diff, d)
    end do
  end do
  write (*, '(a, es10.3, a, i0, a, i0, a)') 'max difference: ', diff, ' (', bad, ' of ', nx * ny, ' values off)'
  if (bad == 0) then
    write (*, '(a)') 'reference: match'
  else
    write (*, '(a)') 'reference: MISMATCH'
    error stop 1
  end if
contains
  integer function arg(i, def, lo)
    integer, intent(in) :: i, def, lo
    character(len=64) :: text
    integer :: ios
    arg = def
    if (command_argument_count() < i) return
    call get_command_argument(i, text)
    read (text, *, iostat=ios) arg
    if (ios /= 0 .or. arg < lo) then
      write (0, '(a, i0, a, i0, a)') 'caller_loop_f90: argument ', i, ' must be an integer >= ', lo, &
        ', got ''' // trim(text) // ''''
      stop 2
    end if
  end function arg
end program caller_loop
