! jacobi_copy.f90 - Jacobi sweeps with a copy-back: a stencil from a into b,
! then a kernel copying b back into a, both in one data region, ITERS times.
! Swapping the roles of a and b (pointers, move_alloc, or two sweeps per
! iteration) removes the copy-back construct; fusing it with the stencil
! would be wrong.
!
! Usage: jacobi_copy_f90 [N [ITERS]]     defaults: 1024 1000
program jacobi_copy
  implicit none
  integer :: n, iters, i, j, it
  real(8), allocatable :: a(:,:), b(:,:)
  character(len=32) :: arg
  n = 1024
  iters = 1000
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) n
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read (arg, *) iters
  end if
  allocate (a(n, n), b(n, n))
  a = 0
  a(1, :) = 1
  a(:, 1) = 1
  b = a
  !$acc data copy(a) copyin(b)
  do it = 1, iters
    !$acc parallel loop collapse(2) present(a, b)
    do j = 2, n - 1
      do i = 2, n - 1
        b(i, j) = 0.25d0 * (a(i - 1, j) + a(i + 1, j) + a(i, j - 1) + a(i, j + 1))
      end do
    end do
    !$acc parallel loop collapse(2) present(a, b)
    do j = 2, n - 1
      do i = 2, n - 1
        a(i, j) = b(i, j)
      end do
    end do
  end do
  !$acc end data
  print '(a, es17.10)', 'sum: ', sum(a)
end program jacobi_copy
